// Builds the dashboard into dist/: our files from src/ plus uPlot's browser
// build and licence. dist/ is committed and compiled into the agent by CMake
// (src/agent/embed_assets.cmake), so building the agent needs no Node.
//
//   npm ci && npm run build
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(fileURLToPath(import.meta.url));
const dist = join(root, "dist");
const uplot = join(root, "node_modules", "uplot");

rmSync(dist, { recursive: true, force: true });
mkdirSync(dist);

for (const name of readdirSync(join(root, "src"))) copyFileSync(join(root, "src", name), join(dist, name));

copyFileSync(join(uplot, "dist", "uPlot.iife.min.js"), join(dist, "uPlot.iife.min.js"));
copyFileSync(join(uplot, "dist", "uPlot.min.css"), join(dist, "uPlot.min.css"));
const { version } = JSON.parse(readFileSync(join(uplot, "package.json"), "utf8"));
writeFileSync(join(dist, "third-party-licenses.txt"),
  `uPlot ${version} (https://github.com/leeoniya/uPlot)\n\n` + readFileSync(join(uplot, "LICENSE"), "utf8"));

// Nothing may load from elsewhere: the page has to work on an air-gapped host.
for (const name of readdirSync(dist)) {
  if (!/\.(html|css)$/.test(name) && name !== "app.js" && name !== "fleet.js") continue;
  const text = readFileSync(join(dist, name), "utf8");
  if (/(src|href)\s*=\s*["']?(https?:)?\/\//i.test(text) || /url\(\s*["']?(https?:)?\/\//i.test(text)) {
    throw new Error(`${name} references an external resource`);
  }
}
console.log(`built ${readdirSync(dist).length} files into dist/`);
