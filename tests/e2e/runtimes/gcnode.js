// A request loop that builds a short-lived object graph per request beside a large old generation
// kept all along, some requests' graphs surviving into it: V8's scavenger runs for every few requests.
const keep = [];
for (let i = 0; i < 300000; i++) keep.push({ id: i, name: "k" + i, tags: [i, i + 1] });
let total = 0;
for (let r = 0; r < 12000; r++) {
  const tmp = [];
  for (let i = 0; i < 2000; i++) tmp.push({ r, i, s: "x" + i, a: [i, r] });
  total += tmp.length;
  if (r % 50 === 0) keep[r % keep.length] = tmp;
}
console.log(total, keep.length);
