// Vite builds the dashboard into dist/. Django serves dist/ as static files under /static/
// and reads dist/.vite/manifest.json to find the hashed entry files (apps/core/views.py).
import react from "@vitejs/plugin-react";
import { defineConfig, loadEnv } from "vite";

export default defineConfig(({ mode }) => {
  // `npm run dev` serves the dashboard on http://localhost:5173/static/ and forwards API,
  // admin and websocket traffic to a Django started with `make run` (or CAIRN_DEV_BACKEND).
  const django = loadEnv(mode, ".", "CAIRN_").CAIRN_DEV_BACKEND || "http://127.0.0.1:8000";
  return {
    base: "/static/",
    plugins: [react()],
    build: {
      outDir: "dist",
      emptyOutDir: true,
      manifest: true,
      target: "es2022",
      rollupOptions: { input: "index.html" },
    },
    server: {
      proxy: {
        "/api": django,
        "/admin": django,
        "/static/admin": django,
        "/static/cairn": django,
        "/ws": { target: django.replace(/^http/, "ws"), ws: true },
      },
    },
    test: {
      environment: "jsdom",
      include: ["src/**/*.test.{ts,tsx}"],
      setupFiles: ["src/test/setup.ts"],
    },
  };
});
