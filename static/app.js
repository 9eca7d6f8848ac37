// Unicity back-office: the only script. Pages work without it; it adds
// copy buttons for long ids. Loaded from /static (the CSP allows no inline script).
document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button || !navigator.clipboard) return;
  navigator.clipboard.writeText(button.dataset.copy).then(() => {
    const label = button.textContent;
    button.textContent = "copied";
    setTimeout(() => { button.textContent = label; }, 1200);
  });
});

// Times are written in UTC; hovering one shows it in the viewer's own time
// zone too.
const localTimes = () => {
  for (const time of document.querySelectorAll("time[datetime]")) {
    const at = new Date(time.getAttribute("datetime"));
    if (Number.isNaN(at.getTime())) continue;
    time.title = `${time.textContent} UTC · ${at.toLocaleString()} your time`;
  }
};
if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", localTimes);
} else {
  localTimes();
}

// The case queue by keyboard: j and k move through the rows, o or Enter
// opens the one marked. Keys typed into a field are left alone.
const queue = document.querySelector("table.queue");
if (queue) {
  const rows = [...queue.querySelectorAll("tbody tr")];
  let current = -1;
  const mark = (index) => {
    if (!rows.length) return;
    if (current >= 0) rows[current].removeAttribute("aria-current");
    current = Math.max(0, Math.min(rows.length - 1, index));
    rows[current].setAttribute("aria-current", "true");
    rows[current].scrollIntoView({ block: "nearest" });
  };
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target.closest("input, select, textarea, button")) return;
    if (event.key === "j") mark(current + 1);
    else if (event.key === "k") mark(current - 1);
    else if ((event.key === "o" || event.key === "Enter") && current >= 0) {
      const link = rows[current].querySelector("a");
      if (link) window.location.assign(link.href);
    } else return;
    event.preventDefault();
  });
}
