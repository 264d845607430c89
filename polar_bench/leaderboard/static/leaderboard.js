// Sortable tables: click a column heading to sort its rows; click again to reverse.
// Cells carry their sort key in data-sort (numbers for numeric columns); empty keys sort last.
(function () {
  "use strict";

  function key(cell, type) {
    var raw = cell.getAttribute("data-sort");
    if (raw === null) { raw = cell.textContent.trim(); }
    if (raw === "") { return null; }
    if (type === "number") {
      var n = parseFloat(raw);
      return isNaN(n) ? null : n;
    }
    return raw.toLowerCase();
  }

  function sortTable(table, col, type, direction) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[col], type), y = key(b.cells[col], type);
      if (x === null || y === null) { return x === y ? 0 : (x === null ? 1 : -1); }
      var c = x < y ? -1 : (x > y ? 1 : 0);
      return direction === "ascending" ? c : -c;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }

  function init(table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      var button = th.querySelector("button");
      if (!button) { return; }
      button.addEventListener("click", function () {
        var current = th.getAttribute("aria-sort");
        var direction = current === "ascending" ? "descending" :
          (current === "descending" ? "ascending" : (th.getAttribute("data-first") || "ascending"));
        Array.prototype.forEach.call(heads, function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", direction);
        sortTable(table, col, th.getAttribute("data-type") || "text", direction);
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), init);
  });
}());
