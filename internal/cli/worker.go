package cli

func init() {
	register(&command{name: "worker", usage: "[--addr ADDR]",
		summary: "run the River workers (= serve --role worker)",
		about:   "Serves only /healthz, /readyz and /metrics on --addr.",
		setup:   serveSetup("worker")})
}
