package run

// LostRunsSQL is the lost-runner sweep's query, for the test of its plan.
const LostRunsSQL = lostRunsSQL
