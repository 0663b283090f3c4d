//! The page's inline assets: the stylesheet, and the script that makes the candidate table
//! sortable (the only script; the page reads the same without it).

pub(super) const CSS: &str = "
body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1100px;margin:24px auto;padding:0 16px;color:#222}
h1{font-size:24px;margin:0 0 12px}h2{font-size:19px;margin:28px 0 6px;border-bottom:1px solid #ddd}
h3{font-size:16px;margin:0 0 6px}
dl.key{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:0}dt{color:#666}dd{margin:0}
.note,.muted{color:#666}.num{font-variant-numeric:tabular-nums;white-space:nowrap}
table{border-collapse:collapse;margin:8px 0}th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}table.small{font-size:13px}
table.sortable th{cursor:pointer}
.dot{display:inline-block;width:10px;height:10px;border-radius:5px;margin-right:5px}
svg.chart{display:block;max-width:100%;height:auto;background:#fff}
svg .grid{stroke:#eee}svg .axis{stroke:#888}svg text{font-size:12px;fill:#333}svg .label{font-size:13px}
section.cand{border:1px solid #ddd;border-radius:6px;padding:10px 14px;margin:12px 0}
pre.diff{background:#fafafa;border:1px solid #eee;padding:8px;overflow-x:auto;font-size:12.5px;line-height:1.35}
pre.diff span{display:block;min-height:1.35em}.nowrap{white-space:nowrap}.add{background:#e6ffec;color:#116329}.del{background:#ffebe9;color:#82071e}
.hunk{color:#6639ba}.file{font-weight:bold}
footer{margin:32px 0;color:#888;font-size:13px}
";

/// Sorts the candidate table by a clicked column (numbers numerically); the page works
/// without it.
pub(super) const SORT_JS: &str = "
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('th').forEach(function (th, col) {
    th.addEventListener('click', function () {
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var asc = th.getAttribute('data-sort') !== 'asc';
      table.querySelectorAll('th').forEach(function (h) { h.removeAttribute('data-sort'); });
      th.setAttribute('data-sort', asc ? 'asc' : 'desc');
      var key = function (r) {
        var t = r.cells[col].textContent.trim();
        var n = parseFloat(t.replace(/^\\[/, ''));
        return isNaN(n) ? t : n;
      };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        var c = (typeof x === 'number' && typeof y === 'number') ? x - y : String(x).localeCompare(String(y));
        return asc ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
";
