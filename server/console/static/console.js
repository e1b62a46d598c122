// Live updates: pages are complete without this script. When the server
// says rows changed (server-sent events from /console/events), the page is
// fetched again and its <main> replaced; a job's page refreshes only for
// its own job.
(function () {
  var live = document.body.getAttribute("data-live");
  if (!live || !window.EventSource) return;
  var state = document.getElementById("live-state");
  var jobOnly = live.indexOf("job=") === 0 ? live.slice(4) : "";
  var busy = false, again = false;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { headers: { "X-Console-Fragment": "1" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        document.getElementById("main").innerHTML = html;
        document.body.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () {})
      .then(function () { busy = false; if (again) { again = false; setTimeout(refresh, 200); } });
  }
  var es = new EventSource("/console/events?" + live);
  es.onopen = function () { state.textContent = "on"; document.body.setAttribute("data-live-state", "on"); };
  es.onerror = function () { state.textContent = "reconnecting"; };
  es.addEventListener("change", function (e) {
    if (jobOnly) {
      var d = JSON.parse(e.data);
      if (d.jobs && d.jobs.length && d.jobs.indexOf(jobOnly) < 0) return;
    }
    refresh();
  });
})();
