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
