// Routes. The sign-in page is in the entry chunk; everything behind a session (the frame, the
// pages, their charts) loads on demand (SignedIn.tsx), so signing in fetches no charting code.
import { lazy, Suspense } from "react";
import { Route, Routes } from "react-router";
import { Loading } from "./components/States";
import { SignInPage } from "./pages/SignIn";

const SignedInApp = lazy(() => import("./SignedIn").then((m) => ({ default: m.SignedInApp })));

export function App() {
  return (
    <Routes>
      <Route path="/signin" element={<SignInPage />} />
      <Route
        path="*"
        element={
          <Suspense fallback={<Loading label="Loading Cairn…" />}>
            <SignedInApp />
          </Suspense>
        }
      />
    </Routes>
  );
}
