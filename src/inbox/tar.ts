/**
 * A minimal POSIX ustar writer for the evidence download: regular files in one directory, no
 * dependencies. `tar -xf bundle.tar && cd <dir> && sha256sum -c SHA256SUMS` checks it.
 */
function header(name: string, size: number, mtime: number): Buffer {
  const h = Buffer.alloc(512, 0);
  const put = (text: string, offset: number, length: number) =>
    h.write(text, offset, Math.min(length, Buffer.byteLength(text)), "utf8");
  const octal = (n: number, length: number) => n.toString(8).padStart(length - 1, "0");
  put(name, 0, 100);
  put(octal(0o644, 8), 100, 8);
  put(octal(0, 8), 108, 8);
  put(octal(0, 8), 116, 8);
  put(octal(size, 12), 124, 12);
  put(octal(mtime, 12), 136, 12);
  h.fill(0x20, 148, 156); // checksum field counts as spaces while summing
  put("0", 156, 1);
  put("ustar\u0000", 257, 6);
  put("00", 263, 2);
  let sum = 0;
  for (const b of h) sum += b;
  put(`${sum.toString(8).padStart(6, "0")}\u0000 `, 148, 8);
  return h;
}

export function tarArchive(
  files: Array<{ name: string; content: Buffer }>,
  mtime = Math.floor(Date.now() / 1000),
): Buffer {
  const parts: Buffer[] = [];
  for (const f of files) {
    if (Buffer.byteLength(f.name) > 100) throw new Error(`file name too long for ustar: ${f.name}`);
    parts.push(header(f.name, f.content.length, mtime), f.content);
    const pad = (512 - (f.content.length % 512)) % 512;
    if (pad) parts.push(Buffer.alloc(pad, 0));
  }
  parts.push(Buffer.alloc(1024, 0));
  return Buffer.concat(parts);
}
