package buyer

import (
	"encoding/json"
	"testing"
	"time"
)

// The bodies' JSON is the contract: every field's name and omitempty as
// the API has always written them (a renamed tag fails here, not at a
// buyer's).
func TestWireNamesAreStable(t *testing.T) {
	at := time.Date(2026, 12, 8, 1, 2, 3, 0, time.UTC)
	d := JobDetail{
		Job: Job{ID: "j", Status: "succeeded", Service: "s", Params: map[string]string{"k": "v"}, Input: Input{Bytes: 1, SHA256: "h"},
			MaxAttempts: 3, AttemptCount: 1, FailureCode: "f", CreatedAt: at, AdmissionDeadline: at, UpdatedAt: at},
		Attempts: []Attempt{{ID: "a", Number: 1, Status: "succeeded", DeviceID: "d", LeaseEpoch: 2, LeaseExpiresAt: at,
			FailureCode: "c", StartedAt: at, EndedAt: &at, Encoder: "e", VerifyMessage: "v", FailureMessage: "m"}},
		Output: &Output{Key: "o", Bytes: 2, SHA256: "h2", DownloadURL: "u"},
	}
	const ts = `"2026-12-08T01:02:03Z"`
	for _, c := range []struct {
		v    any
		want string
	}{
		{d, `{"id":"j","status":"succeeded","service":"s","params":{"k":"v"},"input":{"bytes":1,"sha256":"h"},` +
			`"max_attempts":3,"attempt_count":1,"failure_code":"f","created_at":` + ts + `,"admission_deadline":` + ts + `,"updated_at":` + ts + `,` +
			`"attempts":[{"id":"a","number":1,"status":"succeeded","device_id":"d","epoch":2,"lease_expires_at":` + ts + `,` +
			`"failure_code":"c","started_at":` + ts + `,"ended_at":` + ts + `,"encoder":"e","verify_message":"v","failure_message":"m"}],` +
			`"output":{"key":"o","bytes":2,"sha256":"h2","download_url":"u"}}`},
		{JobDetail{}, `{"id":"","status":"","service":"","params":null,"input":{"bytes":0,"sha256":""},"max_attempts":0,"attempt_count":0,` +
			`"created_at":"0001-01-01T00:00:00Z","admission_deadline":"0001-01-01T00:00:00Z","updated_at":"0001-01-01T00:00:00Z","attempts":null}`},
		{Event{Seq: 1, Kind: "k", AttemptID: "a", FromStatus: "f", ToStatus: "t", Code: "c", Actor: "device", At: at},
			`{"seq":1,"kind":"k","attempt_id":"a","from_status":"f","to_status":"t","code":"c","actor":"device","at":` + ts + `}`},
		{JobsPage{Jobs: []Job{}}, `{"jobs":[]}`},
		{EventsPage{Events: []Event{}, NextCursor: "c"}, `{"events":[],"next_cursor":"c","has_more":false}`},
		{InputDeclaration{Bytes: 1, SHA256: "h"}, `{"bytes":1,"sha256":"h"}`},
		{InputUpload{InputID: "i", Bytes: 1, SHA256: "h", UploadURL: "u", UploadMethod: "PUT", UploadHeaders: map[string]string{"If-None-Match": "*"}, ExpiresAt: at},
			`{"input_id":"i","bytes":1,"sha256":"h","upload_url":"u","upload_method":"PUT","upload_headers":{"If-None-Match":"*"},"expires_at":` + ts + `}`},
		{Error{Code: "c", Message: "m"}, `{"code":"c","message":"m"}`},
		{Error{Code: "c", Message: "m", Field: "f"}, `{"code":"c","message":"m","field":"f"}`},
	} {
		got, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("%T:\n got %s\nwant %s", c.v, got, c.want)
		}
	}
}
