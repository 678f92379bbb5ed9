// Package webhook is the webhooks of a project: their sealed secrets and
// verification material, CRUD and rotation, the refusal counters and the
// retention of the delivery ledger (tables project_webhooks,
// webhook_refusals). A verified delivery is decided by run.Queue.Deliver,
// in the acceptance group. It imports the base domain, project and run.
package webhook
