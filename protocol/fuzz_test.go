package protocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzDecodeAgentFrame: decoding never panics, every rejection is a
// *DecodeError, and every accepted frame is one of the five agent messages
// with the matching type, re-encodes, and decodes again to an equal value.
func FuzzDecodeAgentFrame(f *testing.F) {
	for _, typ := range agentTypes {
		b, err := json.Marshal(agentFrame(typ))
		require.NoError(f, err)
		f.Add(b)
	}
	for _, s := range []string{
		``, `{`, `null`, `[]`, `{}`, `{"type":null}`, `{"type":5}`, `{"type":"bogus"}`,
		`{"type":"slots","slots_free":1,"SLOTS_FREE":2}`,
		`{"type":"hello","Type":"slots","agent_version":"1","services":["a"],"slots_total":1,"slots_free":1}`,
		`{"type":"slots","slots_free":1,"slots_free":null}`,
		`{"type":"slots","slots_free":1e2}`,
		`{"type":"progress","job_id":"` + tJob + `","attempt_id":"` + tAttempt + `","lease_epoch":1,"phase":"committing"}`,
		`{"type":"fail","job_id":"` + tJob + `","attempt_id":"` + tAttempt + `","lease_epoch":1,"commit_token":"t","failure_code":"zz","message":"\ud800\u00e9\xff"}`,
		`{"type":"commit","job_id":"` + tJob + `","attempt_id":"` + tAttempt + `","lease_epoch":1,"commit_token":"t","output":{"key":"k","bytes":0,"sha256":"` + tSHA + `","KEY":"x"}}`,
		`{"type":"welcome","device_id":"d","lease_ttl_ms":1,"heartbeat_ms":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := DecodeAgentFrame(data)
		if err != nil {
			require.Nil(t, v)
			var de *DecodeError
			require.True(t, errors.As(err, &de), "error %T is not a *DecodeError: %v", err, err)
			require.True(t, strings.HasPrefix(err.Error(), "bad message"), err.Error())
			return
		}
		var typ string
		switch m := v.(type) {
		case *Hello:
			typ = m.Type
			require.Equal(t, TypeHello, typ)
			require.NotEmpty(t, m.Services)
			require.LessOrEqual(t, m.SlotsFree, m.SlotsTotal)
		case *Slots:
			typ = m.Type
			require.Equal(t, TypeSlots, typ)
		case *Progress:
			typ = m.Type
			require.Equal(t, TypeProgress, typ)
			require.True(t, m.Phase.LeasePhase())
			require.True(t, ValidID(m.JobID) && ValidID(m.AttemptID))
			require.GreaterOrEqual(t, m.LeaseEpoch, 1)
		case *Fail:
			typ = m.Type
			require.Equal(t, TypeFail, typ)
			require.NotEmpty(t, m.CommitToken)
			require.GreaterOrEqual(t, m.LeaseEpoch, 1)
		case *Commit:
			typ = m.Type
			require.Equal(t, TypeCommit, typ)
			require.NotEmpty(t, m.CommitToken)
			require.True(t, ValidTokenHash(m.Output.SHA256))
			require.GreaterOrEqual(t, m.LeaseEpoch, 1)
		default:
			t.Fatalf("decoded into unexpected %T", v)
		}
		enc := Encode(v)
		again, err := DecodeAgentFrame(enc)
		require.NoError(t, err, "re-encoded frame %s rejected", enc)
		require.Equal(t, v, again)
		require.Equal(t, enc, Encode(again))
	})
}
