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
