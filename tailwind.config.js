/** @type {import('tailwindcss').Config} */
module.exports = {
  content: ["./views/**/*.templ", "./views/**/*.go", "./static/app.js"],
  theme: {
    extend: {
      fontFamily: {
        sans: ["ui-sans-serif", "system-ui", "-apple-system", "Segoe UI", "Roboto", "sans-serif"],
        mono: ["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"],
      },
    },
  },
  plugins: [],
};
