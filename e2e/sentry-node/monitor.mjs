// Cron monitor check-ins through @sentry/node, unmodified, to the DSN in
// SENTRY_DSN: withMonitor around a job that fails, then around two that
// succeed. Run by e2e/sentry_node_test.go (TestSentryNodeWithMonitor)
// against a real anvil server. Each run flushes after its in_progress
// check-in and after its result, so the server sees them in order.
import * as Sentry from "@sentry/node";

Sentry.init({
  dsn: process.env.SENTRY_DSN,
  environment: "production",
  release: "shop@2.0.0",
  defaultIntegrations: false,
});

const config = {
  schedule: { type: "crontab", value: "*/5 * * * *" },
  timezone: "America/New_York",
  checkinMargin: 2,
  maxRuntime: 10,
  failureIssueThreshold: 1,
  recoveryThreshold: 2,
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function job(fail, ms) {
  await Sentry.flush(5000); // the in_progress check-in is out
  await sleep(ms);
  if (fail) throw new Error("pg_dump: connection refused");
}

for (const [fail, ms] of [[true, 300], [false, 1200], [false, 200]]) {
  try {
    await Sentry.withMonitor("invoice-export", () => job(fail, ms), config);
  } catch (err) {
    if (!fail) throw err;
  }
  if (!(await Sentry.flush(10000))) {
    console.error("flush timed out");
    process.exit(1);
  }
}
console.log(JSON.stringify({ ok: true }));
