// Where focus goes when the dashboard's frame first appears: after signing in, to the first
// page's heading (a navigation like any other); on a page load, nowhere (Tab starts at the skip
// link). The sign-in form marks it; the frame (components/Layout.tsx) takes the mark.
let signedIn = false;

export function markSignedIn(): void {
  signedIn = true;
}

export function takeSignedIn(): boolean {
  const was = signedIn;
  signedIn = false;
  return was;
}
