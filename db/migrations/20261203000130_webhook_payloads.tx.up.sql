-- Redelivery from the ledger (docs/contracts/webhooks.md
-- "Evaluating a delivery again"): each ledger row keeps the delivery as the
-- classifier read it (the normalized payload: provider, delivery id, event,
-- kind, ref, branch, commit, repository, pull request), so that a queue_full
-- delivery can be evaluated again from the webhook page without the forge.
-- NULL for rows written before this column, and for deliveries whose body
-- could not be read (kind "malformed"): those cannot be evaluated again.
ALTER TABLE project_webhook_deliveries ADD COLUMN payload jsonb;
