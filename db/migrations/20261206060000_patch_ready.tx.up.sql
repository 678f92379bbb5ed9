-- A repair run without a forge to propose its change to passes with the
-- change kept as a patch (docs/architecture.md, "Repairs"): ready marks
-- such a patch, which the run list and pages read as "patch ready —
-- download or apply". A patch of a run that opened a pull request, or whose
-- push or pull request failed, is not ready.
ALTER TABLE run_patches ADD COLUMN ready boolean NOT NULL DEFAULT false;
