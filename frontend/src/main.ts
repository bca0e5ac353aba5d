import "./styles.css";
import { Dashboard } from "./app";

const root = document.getElementById("app");
if (root) void new Dashboard(root).start();
