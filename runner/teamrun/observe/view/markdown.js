// A small, safe Markdown renderer for answers: it builds DOM nodes and puts every piece of text in with
// textContent, so nothing a model writes is ever parsed as HTML (a <script> or <img onerror> in an answer
// shows as the text it is). Subset: headings, paragraphs, lists, block quotes, fenced and inline code,
// bold, italic, and links to http(s)/mailto addresses only.
"use strict";
(function (global) {
  const SAFE_LINK = /^(https?:|mailto:)/i;

  function el(tag, text) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // Inline: `code`, **bold**, *italic* / _italic_, [text](url). Anything else is text.
  const INLINE = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|(?<!\w)__([^_]+)__(?!\w)|\*([^*\s][^*]*)\*|(?<!\w)_([^_\s][^_]*)_(?!\w)|\[([^\]]+)\]\(([^)\s]+)\)/g;

  function inline(parent, text) {
    let last = 0;
    const pattern = new RegExp(INLINE.source, "g");  // its own: the calls nest (bold inside a link...)
    for (let m; (m = pattern.exec(text)) !== null;) {
      if (m.index > last) parent.append(document.createTextNode(text.slice(last, m.index)));
      if (m[2] !== undefined) parent.append(el("code", m[2]));
      else if (m[3] !== undefined || m[4] !== undefined) inline(parent.appendChild(el("strong")), m[3] ?? m[4]);
      else if (m[5] !== undefined || m[6] !== undefined) inline(parent.appendChild(el("em")), m[5] ?? m[6]);
      else if (m[7] !== undefined) {
        const href = m[8];
        if (SAFE_LINK.test(href)) {
          const a = el("a");
          a.href = href;
          a.rel = "noopener noreferrer nofollow";
          a.target = "_blank";
          inline(a, m[7]);
          parent.append(a);
        } else parent.append(document.createTextNode(m[0]));
      }
      last = pattern.lastIndex;
    }
    if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
  }

  function render(target, source) {
    const lines = String(source ?? "").replace(/\r\n?/g, "\n").split("\n");
    const out = document.createDocumentFragment();
    let i = 0;
    const isBlank = (s) => !s.trim();
    const listItem = /^\s*([-*+]|\d{1,9}[.)])\s+(.*)$/;
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if (isBlank(line)) { i++; continue; }
      if ((m = /^\s*(```|~~~)\s*([\w+-]*)\s*$/.exec(line))) {
        const fence = m[1], body = [];
        for (i++; i < lines.length && !lines[i].trim().startsWith(fence); i++) body.push(lines[i]);
        i++;
        const pre = el("pre"), code = el("code", body.join("\n"));
        if (m[2]) code.dataset.lang = m[2];
        pre.append(code);
        out.append(pre);
      } else if ((m = /^\s*(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line))) {
        inline(out.appendChild(el("h" + Math.min(m[1].length + 2, 6))), m[2]);
        i++;
      } else if (/^\s*([-*_])\s*(\1\s*){2,}$/.test(line)) {
        out.append(el("hr"));
        i++;
      } else if (/^\s*>/.test(line)) {
        const body = [];
        for (; i < lines.length && /^\s*>/.test(lines[i]); i++) body.push(lines[i].replace(/^\s*>\s?/, ""));
        const quote = el("blockquote");
        render(quote, body.join("\n"));
        out.append(quote);
      } else if ((m = listItem.exec(line))) {
        const ordered = /\d/.test(m[1]);
        const list = el(ordered ? "ol" : "ul");
        for (; i < lines.length && (m = listItem.exec(lines[i])) && /\d/.test(m[1]) === ordered; i++) {
          let text = m[2];
          while (i + 1 < lines.length && /^\s{2,}\S/.test(lines[i + 1]) && !listItem.test(lines[i + 1])) {
            text += " " + lines[++i].trim();
          }
          inline(list.appendChild(el("li")), text);
        }
        out.append(list);
      } else {
        const body = [lines[i++].trim()];  // the first line always: no block above took it
        for (; i < lines.length && !isBlank(lines[i]) && !/^\s*(```|~~~|#{1,6}\s|>)/.test(lines[i])
               && !listItem.test(lines[i]); i++) body.push(lines[i].trim());
        const p = el("p");
        body.forEach((text, n) => { if (n) p.append(el("br")); inline(p, text); });
        out.append(p);
      }
    }
    target.replaceChildren(out);
    return target;
  }

  global.TeamrunMarkdown = { render };
})(window);
