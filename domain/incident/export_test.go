package incident

// SpreadTagsSQL lets the tests read the spread's plan.
const SpreadTagsSQL = spreadTagsSQL
