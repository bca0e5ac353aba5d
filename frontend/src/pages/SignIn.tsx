import { Alert, Button, Center, Paper, PasswordInput, Stack, Text, TextInput, Title } from "@mantine/core";
import { useQueryClient } from "@tanstack/react-query";
import { useEffect, useState, type FormEvent } from "react";
import { useNavigate, useSearchParams } from "react-router";
import { errorAdvice } from "../components/States";
import { ThemeToggle } from "../components/ThemeToggle";
import { markSignedIn } from "../lib/landing";
import { ME_KEY, signIn } from "../session";

/** Only same-site paths are followed after sign-in (no open redirect). */
export function safeNext(next: string | null): string {
  return next && next.startsWith("/") && !next.startsWith("//") ? next : "/";
}

/** Pages Django serves itself (the API reference, the admin): loaded after sign-in, not routed. */
export function isServerPage(path: string): boolean {
  return /^\/(api|admin|nb)\//.test(path);
}

export function SignInPage() {
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const navigate = useNavigate();
  const [params] = useSearchParams();
  const queryClient = useQueryClient();
  useEffect(() => {
    document.title = "Sign in · Cairn";
  }, []);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const me = await signIn(username, password);
      queryClient.setQueryData(ME_KEY, me);
      const next = safeNext(params.get("next"));
      if (isServerPage(next)) window.location.assign(next);
      else {
        markSignedIn(); // the first page's heading takes focus (the form is gone)
        navigate(next, { replace: true });
      }
    } catch (err) {
      setError(errorAdvice(err).detail);
    } finally {
      setBusy(false);
    }
  };

  return (
    <Center component="main" mih="100vh" p="md">
      <Paper withBorder shadow="sm" p="xl" w={380} component="form" onSubmit={submit}>
        <Stack>
          <Stack gap={2}>
            <Title order={1} size="h2">Sign in to Cairn</Title>
            <Text c="dimmed" size="sm">Use the account your administrator gave you.</Text>
          </Stack>
          {error && (
            <Alert color="red" data-testid="signin-error">
              {error}
            </Alert>
          )}
          {/* The page's one task is this form: starting in its first field is what users expect. */}
          {/* eslint-disable-next-line jsx-a11y/no-autofocus */}
          <TextInput label="Username" name="username" autoComplete="username" required withAsterisk={false} autoFocus
            value={username} onChange={(e) => setUsername(e.currentTarget.value)} />
          <PasswordInput label="Password" name="password" autoComplete="current-password" required withAsterisk={false}
            value={password} onChange={(e) => setPassword(e.currentTarget.value)} />
          <Button type="submit" loading={busy} data-testid="signin-submit">Sign in</Button>
          <Center><ThemeToggle /></Center>
        </Stack>
      </Paper>
    </Center>
  );
}
