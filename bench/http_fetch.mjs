// bench/http_fetch.mjs -- the peer of the HTTP benchmark: Node's built-in fetch,
// `node http_fetch.mjs URL N` GETs URL N times at once (Promise.all) and prints the
// bytes received.
const [url, n] = [process.argv[2], Number(process.argv[3])];
const sizes = await Promise.all(
  Array.from({ length: n }, () => fetch(url).then((r) => r.arrayBuffer()).then((b) => b.byteLength)));
console.log(sizes.reduce((a, b) => a + b, 0));
