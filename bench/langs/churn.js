// STEPS requests of fixed work: a 32 MiB Buffer per request, filled and dropped.
function handle(i) {
  const b = Buffer.alloc(32 << 20);
  for (let k = 0; k < b.length; k += 4096) b[k] = i & 0xff;
  return b[4096];
}
const steps = Number(process.argv[2] || 100);
let total = 0;
for (let i = 0; i < steps; i++) total += handle(i);
console.log(total);
