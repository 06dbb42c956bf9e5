//! The page around the content: escaping, the document with its style and its one small
//! script (sortable tables), and a table builder. Everything a patch, a log, a task or a
//! model name can hold goes through [`esc`]; the page loads nothing (its
//! Content-Security-Policy forbids every fetch), so it reads the same offline.

use std::fmt::Write;

/// Text made safe for HTML content and quoted attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// A relative path for an `href`: every byte but unreserved ones and `/` percent-encoded
/// (so a name cannot become a `javascript:` URL or leave the attribute).
pub fn href(path: &str) -> String {
    let mut out = String::new();
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    // A leading slash would not be relative (`//host` would even name another host); a
    // colon is encoded above, so no scheme is left.
    if out.starts_with('/') {
        out.insert_str(0, "./");
    }
    out
}

/// An id usable in `id=` and `#` links: `s.` and the parts joined by dots, anything but
/// letters, digits and `-` in them escaped as `_xx`.
pub fn anchor(parts: &[&str]) -> String {
    let mut out = String::from("s");
    for p in parts {
        out.push('.');
        for b in p.bytes() {
            if b.is_ascii_alphanumeric() || b == b'-' {
                out.push(b as char);
            } else {
                let _ = write!(out, "_{b:02x}");
            }
        }
    }
    out
}

const STYLE: &str = r#"
:root{color-scheme:light;--fg:#1b1b1b;--muted:#5b5b5b;--line:#d7d7d7;--bg2:#f5f6f8;--yes:#0a7a3d;--no:#a12a2a;--open:#8a6d00}
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);margin:0 auto;padding:16px;max-width:1240px}
h1{font-size:1.45em;margin:.2em 0}h2{font-size:1.2em;margin:1.4em 0 .4em;border-bottom:1px solid var(--line)}h3{font-size:1.02em;margin:1em 0 .3em}
.muted{color:var(--muted)}.banner{background:#fff3cd;border:1px solid #e0c36a;padding:8px 12px;border-radius:6px;margin:8px 0}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}.card{background:var(--bg2);border-radius:8px;padding:8px 14px;min-width:150px}.card b{display:block;font-size:1.35em}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch}
table{border-collapse:collapse;font-size:.92em;margin:.3em 0}th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:middle;white-space:nowrap}
td.wrap{white-space:normal;min-width:9em;max-width:15em;overflow-wrap:anywhere}td.narrow{min-width:5em;max-width:9em}caption{white-space:normal}
.filters label{margin-right:14px}.filters input,.filters select{font:inherit;padding:2px 6px}th{background:var(--bg2);position:sticky;top:0}
th.sortable{cursor:pointer}th.sortable::after{content:" \2195";color:var(--muted)}th[aria-sort=ascending]::after{content:" \2191"}th[aria-sort=descending]::after{content:" \2193"}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.yes{color:var(--yes);font-weight:600}.no{color:var(--no)}.undecided{color:var(--open);font-weight:600}
svg text{font-size:10px;fill:var(--muted)}svg.mark{display:block}svg.chart{width:100%;max-width:560px;height:auto;display:block}svg.chart.small{max-width:280px}
.unit{stroke:#9a9a9a;stroke-width:1}.thr{stroke:#a12a2a;stroke-width:1;stroke-dasharray:3 2}.ci{stroke:#0072B2;stroke-width:3;stroke-linecap:round}
.est{fill:#0072B2;stroke:#0072B2;stroke-width:1.5}.est.open{fill:#fff}.grid{stroke:#e6e6e6}
.dots{stroke-width:6;stroke-linecap:round;fill:none}.flagged{fill:none;stroke:#D55E00;stroke-width:2}.line{fill:none;stroke-width:1.6}.band{opacity:.15;stroke:none}
details{border:1px solid var(--line);border-radius:6px;margin:6px 0;padding:4px 10px}details>summary{cursor:pointer;font-weight:600}
.grid2{display:flex;flex-wrap:wrap;gap:12px}.legend span{display:inline-block;margin-right:12px}.legend i{display:inline-block;width:10px;height:10px;border-radius:50%;margin-right:4px;vertical-align:middle}
pre{white-space:pre-wrap;word-break:break-word;background:var(--bg2);padding:6px;border-radius:4px}
@media (max-width:700px){body{padding:8px;font-size:14px}.card{min-width:120px}td.wrap{min-width:10em}}
"#;

const SCRIPT: &str = r#"
(function(){
  function key(td){var v=td.getAttribute('data-sort');if(v===null){v=td.textContent.trim();}
    var n=parseFloat(v);return isNaN(n)||!/^[-+.0-9eE]+$/.test(v)?{s:v.toLowerCase()}:{n:n};}
  function cmp(a,b){if(a.n!==undefined&&b.n!==undefined){return a.n-b.n;}
    var x=a.n!==undefined?String(a.n):a.s,y=b.n!==undefined?String(b.n):b.s;return x<y?-1:x>y?1:0;}
  function openTarget(){var id=decodeURIComponent(location.hash.slice(1));var el=id&&document.getElementById(id);
    if(el&&el.tagName==='DETAILS'){el.open=true;}}
  window.addEventListener('hashchange',openTarget);openTarget();
  var status=document.getElementById('status-filter'),search=document.getElementById('sample-search');
  function filter(){
    var want=status.value,q=search.value.trim().toLowerCase(),shown=0,rows=document.querySelectorAll('#samples tbody tr');
    rows.forEach(function(r){var s=r.querySelector('[data-status]');
      var ok=(!want||(s&&s.getAttribute('data-status')===want))&&(!q||r.textContent.toLowerCase().indexOf(q)>=0);
      r.style.display=ok?'':'none';if(ok){shown++;}});
    document.getElementById('filter-count').textContent=(want||q)?shown+' of '+rows.length+' samples':'';
  }
  if(status&&search){status.addEventListener('change',filter);search.addEventListener('input',filter);}
  document.querySelectorAll('table.sortable').forEach(function(table){
    var heads=table.querySelectorAll('thead th');
    heads.forEach(function(th,col){
      th.classList.add('sortable');th.tabIndex=0;
      function sort(){
        var asc=th.getAttribute('aria-sort')!=='ascending';
        heads.forEach(function(h){h.removeAttribute('aria-sort');});
        th.setAttribute('aria-sort',asc?'ascending':'descending');
        var body=table.tBodies[0];var rows=Array.prototype.slice.call(body.rows);
        rows.sort(function(r1,r2){var c=cmp(key(r1.cells[col]),key(r2.cells[col]));return asc?c:-c;});
        rows.forEach(function(r){body.appendChild(r);});
      }
      th.addEventListener('click',sort);
      th.addEventListener('keydown',function(e){if(e.key==='Enter'||e.key===' '){e.preventDefault();sort();}});
    });
  });
})();
"#;

/// The page's one script as a Content-Security-Policy source (`'sha256-<base64>'`):
/// `harness view` lets a page run this script and no other, so a page the harness did not
/// write runs none.
pub fn script_source_hash() -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(SCRIPT.as_bytes());
    format!("'sha256-{}'", base64(&digest))
}

/// Standard base64 with padding (RFC 4648), as CSP hashes are written.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The whole document around `body`.
pub fn document(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\
<title>{}</title><style>{STYLE}</style></head><body>\n{body}\n<script>{SCRIPT}</script></body></html>\n",
        esc(title)
    )
}

/// A table: header cells (already HTML) and rows of cells (already HTML). `sortable` adds
/// click-to-sort on every column.
pub struct Table {
    pub caption: String,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
    pub sortable: bool,
}

/// Header cells from plain names.
pub fn headers(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| esc(n)).collect()
}

/// One cell: its HTML, a sort key when the text is not it, and a class.
#[derive(Default)]
pub struct Cell {
    pub html: String,
    pub sort: Option<String>,
    pub class: &'static str,
    pub attrs: String,
}

impl Cell {
    pub fn text(text: &str) -> Cell {
        Cell {
            html: esc(text),
            ..Cell::default()
        }
    }

    pub fn html(html: String) -> Cell {
        Cell {
            html,
            ..Cell::default()
        }
    }

    pub fn num(html: String, sort: f64) -> Cell {
        Cell {
            html,
            sort: sort.is_finite().then(|| format!("{sort}")),
            class: "num",
            ..Cell::default()
        }
    }
}

impl Table {
    pub fn render(&self) -> String {
        let mut out = format!(
            "<div class=\"scroll\"><table{}><caption class=\"muted\">{}</caption><thead><tr>",
            if self.sortable {
                " class=\"sortable\""
            } else {
                ""
            },
            esc(&self.caption)
        );
        for h in &self.headers {
            let _ = write!(out, "<th scope=\"col\">{h}</th>");
        }
        out.push_str("</tr></thead><tbody>");
        for row in &self.rows {
            out.push_str("<tr>");
            for c in row {
                let sort = c
                    .sort
                    .as_ref()
                    .map(|s| format!(" data-sort=\"{}\"", esc(s)))
                    .unwrap_or_default();
                let class = if c.class.is_empty() {
                    String::new()
                } else {
                    format!(" class=\"{}\"", c.class)
                };
                let _ = write!(out, "<td{class}{sort}{}>{}</td>", c.attrs, c.html);
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table></div>");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup_and_hrefs_stay_relative() {
        assert_eq!(
            esc("<script>alert('x')</script>&\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"
        );
        assert_eq!(href("m/a b/0/patch.diff"), "m/a%20b/0/patch.diff");
        assert_eq!(href("javascript:alert(1)"), "javascript%3Aalert%281%29");
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
        ] {
            assert_eq!(base64(plain.as_bytes()), coded);
        }
        // The hash is of the script exactly as the document holds it.
        let doc = document("t", "");
        let script = doc
            .split("<script>")
            .nth(1)
            .and_then(|s| s.split("</script>").next());
        assert_eq!(script, Some(SCRIPT));
        assert!(script_source_hash().starts_with("'sha256-") && script_source_hash().len() == 53);
        assert_eq!(href("/etc/passwd"), ".//etc/passwd");
        assert_eq!(anchor(&["x<y.z", "0"]), "s.x_3cy_2ez.0");
    }
}
