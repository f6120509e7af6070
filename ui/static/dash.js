// The dashboard's live pages (ui/live.go). Each element with data-live is
// a part of the page that the node's event stream (main's data-events)
// pushes anew, by the event of that name. If the stream is refused, or the
// browser has no EventSource, each part polls its data-poll URL instead.
// A part with data-charts holds charts, drawn by uPlot from JSON.
"use strict";
(function () {
  const main = document.querySelector("main[data-events]");
  const status = document.getElementById("live");
  const parts = [...document.querySelectorAll("[data-live]")];
  const pollEvery = 2000;

  function say(text, bad) {
    if (!status) return;
    status.textContent = text;
    status.classList.toggle("bad", !!bad);
  }

  function put(el, data) {
    if (el.hasAttribute("data-charts")) drawCharts(el, JSON.parse(data));
    else el.innerHTML = data; // markup the node rendered and escaped
  }

  // poll is the fallback: every part fetches its own URL, one request at
  // a time each.
  function poll(why) {
    say("Polling every " + pollEvery / 1000 + " s: " + why, true);
    for (const el of parts) {
      const url = el.dataset.poll;
      if (!url) continue;
      let busy = false;
      setInterval(async () => {
        if (busy) return;
        busy = true;
        try {
          const r = await fetch(url, { headers: { "Leasehold-Fragment": "true" }, cache: "no-store" });
          const text = await r.text();
          if (el.hasAttribute("data-charts") && !r.ok) say(text, true);
          else put(el, text);
        } catch (e) {
          say("Polling failed: " + e.message, true);
        } finally {
          busy = false;
        }
      }, pollEvery);
    }
  }

  function listen() {
    const es = new EventSource(main.dataset.events);
    es.onopen = () => say("Live: the node pushes each change.");
    for (const el of parts) es.addEventListener(el.dataset.live, (e) => put(el, e.data));
    es.addEventListener("failed", (e) => say(e.data, true));
    es.addEventListener("ended", (e) => {
      es.close();
      say(e.data, true);
    });
    es.onerror = () => {
      // CLOSED: refused (an error status); else it reconnects by itself.
      if (es.readyState === EventSource.CLOSED) poll("the node refused the live stream.");
      else say("Reconnecting to the live stream…", true);
    };
  }

  // Charts.

  const pad = (n) => String(n).padStart(2, "0");
  function fmtTime(sec, withSeconds) {
    const d = new Date(sec * 1000);
    return pad(d.getHours()) + ":" + pad(d.getMinutes()) + (withSeconds ? ":" + pad(d.getSeconds()) : "");
  }
  function fmtNum(v) {
    if (v == null) return "—";
    if (Math.abs(v) >= 1000) return (Math.round(v / 100) / 10) + "k";
    return String(Math.round(v * 100) / 100);
  }

  // The tick labels drawn are kept on the figure (data-x-ticks,
  // data-y-ticks): the axes are painted on a canvas.
  function ticks(fig, axis, labels) {
    fig.dataset[axis + "Ticks"] = labels.join(" | ");
    return labels;
  }

  // Counts step by whole numbers.
  const counts = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 1e7, 1e8, 1e9];

  // lone are the points with no neighbour, which a line cannot show.
  function lone(u, si) {
    const d = u.data[si];
    const out = [];
    for (let i = 0; i < d.length; i++) {
      if (d[i] != null && d[i - 1] == null && d[i + 1] == null) out.push(i);
    }
    return out;
  }

  function options(c, span, fig) {
    return {
      width: 440,
      height: 180,
      scales: {
        x: { time: true, range: (u, lo, hi) => [hi - span, hi] },
        y: { range: (u, lo, hi) => [0, Math.max(1, hi * 1.1)] },
      },
      series: [
        { label: "Time", value: (u, v) => (v == null ? "—" : fmtTime(v, true)) },
        {
          label: c.title,
          stroke: "#2563eb",
          fill: "rgba(37, 99, 235, 0.12)",
          width: 1.5,
          value: (u, v) => (v == null ? "—" : fmtNum(v) + " " + c.unit),
          points: { show: true, size: 5, filter: lone },
        },
      ],
      axes: [
        { space: 80, values: (u, splits) => ticks(fig, "x", splits.map((s) => fmtTime(s, splits.length > 1 && splits[1] - splits[0] < 60))) },
        { label: c.unit, size: 56, incrs: c.unit === "seconds" ? undefined : counts, values: (u, splits) => ticks(fig, "y", splits.map(fmtNum)) },
      ],
      legend: { live: true },
    };
  }

  function drawCharts(el, data) {
    if (!window.uPlot) return;
    let shown = el.charts;
    if (!shown || shown.length !== data.charts.length || shown.some((s, i) => s.title !== data.charts[i].title)) {
      shown?.forEach((s) => s.u.destroy());
      el.replaceChildren();
      shown = data.charts.map((c) => {
        const fig = document.createElement("figure");
        fig.className = "chart";
        fig.dataset.title = c.title;
        const cap = document.createElement("figcaption");
        fig.append(cap);
        el.append(fig);
        const u = new uPlot(options(c, data.span, fig), [c.times, c.values], fig);
        return { title: c.title, u, cap };
      });
      el.charts = shown;
    }
    data.charts.forEach((c, i) => {
      const { u, cap } = shown[i];
      u.setData([c.times, c.values]);
      const now = document.createElement("span");
      now.className = "num";
      now.textContent = fmtNum(c.last);
      cap.replaceChildren(c.title + ": ", now, " now (max " + fmtNum(c.max) + ")");
    });
  }

  function start() {
    for (const el of document.querySelectorAll("[data-charts]")) {
      if (el.dataset.charts) drawCharts(el, JSON.parse(el.dataset.charts));
    }
    if (!main || parts.length === 0) return;
    if (window.EventSource) listen();
    else poll("this browser has no EventSource.");
  }
  start();
})();
