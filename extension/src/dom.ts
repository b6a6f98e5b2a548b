// The DOM helper every view builds with, and the one number format they all write. Bottom of the views with
// payload.ts: imports nothing. Text reaches the page only through createTextNode and setAttribute here.

type Attrs = Record<string, string | number>;
type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) if (c) el.append(typeof c === "string" ? document.createTextNode(c) : c);
  return el;
}

/** Seconds as milliseconds text: three decimals under 10 ms, one above. */
export const ms = (s: number) => (s * 1000).toFixed(s < 0.01 ? 3 : 1);
