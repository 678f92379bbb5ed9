// anvil's little JavaScript: copy buttons and confirmations of plain forms.
// Everything else is htmx. The Content-Security-Policy allows no inline
// script, so no page carries an on…= handler: behaviour lives here.
document.addEventListener("click", (ev) => {
  const btn = ev.target.closest("[data-copy]");
  if (!btn) return;
  const el = document.querySelector(btn.getAttribute("data-copy"));
  if (!el) return;
  navigator.clipboard?.writeText(el.textContent.trim()).then(() => {
    const old = btn.textContent;
    btn.textContent = "Copied";
    setTimeout(() => { btn.textContent = old; }, 1500);
  });
});

// A plain form with data-confirm asks before it is sent (htmx elements use
// hx-confirm instead).
document.addEventListener("submit", (ev) => {
  const form = ev.target.closest("form[data-confirm]");
  if (form && !window.confirm(form.getAttribute("data-confirm"))) ev.preventDefault();
});
