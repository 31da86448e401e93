/**
 * What the image carries of the build, read from the Containerfile itself: an
 * addon built but not copied in leaves the image on its slower fallback
 * without a word (the driver logs the backend it uses, nothing fails).
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { expect } from "chai";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

describe("Containerfile", () => {
  it("copies every native addon binding.gyp builds into the image", () => {
    const gyp = JSON.parse(readFileSync(`${ROOT}binding.gyp`, "utf8").replace(/#.*$/gm, "")) as {
      targets: Array<{ target_name: string }>;
    };
    const built = gyp.targets.map((t) => `${t.target_name}.node`).sort();
    const copied = [
      ...readFileSync(`${ROOT}Containerfile`, "utf8").matchAll(
        /\/src\/build\/Release\/(cni_driver_\w+\.node)/g,
      ),
    ]
      .map((m) => m[1])
      .sort();
    expect(built.length).to.be.greaterThan(0);
    expect(copied).to.deep.equal(built);
  });
});
