// `snarkjs.groth16.prove` timed inside one node process, with the zkey and the witness already in
// memory and the curve (wasm and worker threads) built by a first, untimed proof: the in-process
// counterpart of cuzk's prover timed with its key decoded. snarkjs still parses the zkey's sections
// inside every proof; it has no resident-key mode.
//
//   node benchmarks/snarkjs_prove_in_process.cjs REPO_ROOT ZKEY WTNS REPS   -> {"samples_s": [...]}
"use strict";
const fs = require("fs");
const path = require("path");

async function main() {
    const [root, zkeyPath, wtnsPath, repsArg] = process.argv.slice(2);
    const reps = Number(repsArg);
    if (!root || !zkeyPath || !wtnsPath || !(reps >= 1)) {
        throw new Error("usage: snarkjs_prove_in_process.cjs REPO_ROOT ZKEY WTNS REPS");
    }
    const snarkjs = require(path.join(root, "node_modules", "snarkjs"));
    const zkey = new Uint8Array(fs.readFileSync(zkeyPath));
    const wtns = new Uint8Array(fs.readFileSync(wtnsPath));
    await snarkjs.groth16.prove(zkey, wtns);
    const samples = [];
    for (let i = 0; i < reps; i++) {
        const start = process.hrtime.bigint();
        await snarkjs.groth16.prove(zkey, wtns);
        samples.push(Number(process.hrtime.bigint() - start) / 1e9);
    }
    process.stdout.write(JSON.stringify({ samples_s: samples }) + "\n");
}

main().then(
    () => process.exit(0),   // the curve's worker threads would keep node running
    (err) => { console.error(err.message); process.exit(1); },
);
