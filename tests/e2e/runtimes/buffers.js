// A request handler that allocates a 64 MiB buffer per request and fills it.
function handle(i) {
  const buf = Buffer.alloc(64 << 20);
  for (let k = 0; k < buf.length; k += 4096) buf[k] = i & 0xff;
  let s = 0;
  for (let k = 0; k < buf.length; k += 65536) s += buf[k];
  return s;
}
let total = 0;
for (let i = 0; i < 40; i++) total += handle(i);
console.log(total);
