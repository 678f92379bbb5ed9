package erasure_test

import (
	"testing"

	"anvil/db/testdb"
	"anvil/domain/forge"
	"anvil/domain/internal/domaintest"
)

func TestMain(m *testing.M) { testdb.Main(m) }

var (
	strp      = domaintest.Strp
	feedEvent = domaintest.FeedEvent
	errCode   = domaintest.ErrCode
)

const shaA = "199eddf46df50de8d02e99bf1c5fdb4101338224"

func boolp(b bool) *bool { return &b }

func push(provider forge.Provider, id, branch, sha string) forge.Payload {
	return forge.Payload{Provider: provider, DeliveryID: id, Kind: forge.KindPush, Event: "push",
		Ref: "refs/heads/" + branch, Branch: branch, CommitSHA: sha, BeforeSHA: "a10867b14bb761a232cd80139fbd4c0d33264240"}
}
