// The history page's charts: reads the JSON the page carries (#console-history-data) and draws
// one Chart.js chart per entry; redraws when console.js has put a refreshed live part in place.
"use strict";
(function () {
  const PALETTE = ["#417690", "#e07b39", "#5b8c3a", "#b8423a", "#8a63a6", "#c9a227", "#3a9c9c",
                   "#7a7a7a", "#d1608f", "#4b5cc4"];
  const charts = new Map();

  function draw() {
    const source = document.getElementById("console-history-data");
    if (!source || typeof Chart === "undefined") return;
    const data = JSON.parse(source.textContent);
    const labels = data.labels.map((iso) => iso.slice(5, 16).replace("T", " "));
    for (const chart of data.charts) {
      const canvas = document.getElementById("chart-" + chart.id);
      if (!canvas) continue;
      const datasets = Object.entries(chart.series).map(([name, values], i) => ({
        label: name, data: values, borderColor: PALETTE[i % PALETTE.length],
        backgroundColor: PALETTE[i % PALETTE.length] + (chart.stacked ? "cc" : "33"),
        fill: Boolean(chart.stacked), pointRadius: chart.stacked ? 0 : 2, borderWidth: 1.5,
        spanGaps: true,
      }));
      const old = charts.get(chart.id);
      if (old && old.canvas === canvas) {
        old.data.labels = labels;
        old.data.datasets = datasets;
        old.update("none");
        continue;
      }
      if (old) old.destroy();
      charts.set(chart.id, new Chart(canvas, {
        type: chart.stacked ? "bar" : "line",
        data: { labels, datasets },
        options: {
          animation: false, responsive: true, maintainAspectRatio: false,
          interaction: { mode: "index", intersect: false },
          scales: { x: { stacked: Boolean(chart.stacked), ticks: { maxTicksLimit: 12 } },
                    y: { stacked: Boolean(chart.stacked), beginAtZero: true } },
          plugins: { legend: { position: "bottom" } },
        },
      }));
    }
  }

  document.addEventListener("DOMContentLoaded", draw);
  document.addEventListener("console:refreshed", draw);
})();
