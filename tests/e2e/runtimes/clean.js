// A JavaScript loop that computes and allocates little: nothing material to find.
let s = 0;
for (let i = 0; i < 3e8; i++) s += i % 7;
console.log(s);
