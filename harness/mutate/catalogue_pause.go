package mutate

func init() { Catalogue = append(Catalogue, pauseMutants...) }

// pauseMutants break pausing a service (SPEC section 3, "Pausing a
// service"): the matcher, the sweeper, the pause and resume statements and
// the operators' authentication of the admin routes. qualify kills them
// through the differential campaigns (pause and resume are events of the
// generator) and scenarios 320 and 321 (service_paused,
// service_paused_admission_deadline).
var pauseMutants = []Mutant{
	{ID: "pause-matcher-ignores-pause", Kind: "where-predicate", File: "server/fencing/lease.go",
		Old:   "ANY(ARRAY(SELECT unnest($1::text[]) EXCEPT SELECT service FROM paused_services))",
		New:   "ANY($1::text[])",
		What:  "the matcher ignores the pause: a device is offered jobs of a paused service (killed by the campaigns and service_paused)",
		Rules: []string{"service.paused-not-offered"}},
	{ID: "pause-sweeper-skips-paused", Kind: "where-predicate", File: "server/fencing/sweep.go",
		Old:   "SELECT id::text FROM jobs WHERE status = 'queued' AND admission_deadline <= $1 ORDER BY",
		New:   "SELECT id::text FROM jobs WHERE status = 'queued' AND admission_deadline <= $1 AND service NOT IN (SELECT service FROM paused_services) ORDER BY",
		What:  "the sweeper skips a paused service's queued jobs: they outlive their admission deadline (killed by the campaigns and service_paused_admission_deadline)",
		Rules: []string{"service.paused-admission-deadline"}},
	{ID: "pause-resume-keeps-row", Kind: "statement", File: "server/fencing/pause.go",
		Old:   "DELETE FROM paused_services WHERE service = $1 RETURNING service),",
		New:   "SELECT service FROM paused_services WHERE service = $1),",
		What:  "resume answers resumed and writes its audit row but leaves the service paused (killed by the campaigns and service_paused)",
		Rules: []string{"service.resume-offers"}},
	{ID: "pause-resume-not-notified", Kind: "statement", File: "server/fencing/pause.go",
		Old:   "SELECT count(*) FROM (SELECT pg_notify('` + JobsChannel + `', service) FROM a) n`",
		New:   "SELECT count(*) FROM a`",
		What:  "resume tells no gateway: an idle device is offered the resumed service's jobs only at a poll, never with the poll off (killed by service_paused)",
		Rules: []string{"service.resume-offers"}},
	{ID: "pause-repeat-writes", Kind: "statement", File: "server/fencing/pause.go",
		Old:   "ON CONFLICT (service) DO NOTHING",
		New:   "ON CONFLICT (service) DO UPDATE SET operator_id = EXCLUDED.operator_id",
		What:  "a second pause of a paused service answers paused and appends another audit row (killed by the campaigns and service_paused)",
		Rules: []string{"service.pause-idempotent"}},
	{ID: "pause-revoked-operator", Kind: "where-predicate", File: "server/api/pause.go",
		Old:   "WHERE token_hash = $1 AND revoked_at IS NULL`",
		New:   "WHERE token_hash = $1`",
		What:  "a revoked operator's credential still pauses and resumes services (killed by service_paused)",
		Rules: []string{"service.pause-operators-only"}},
	{ID: "pause-audit-wrong-operator", Kind: "statement", File: "server/fencing/pause.go",
		Old:   "SELECT service, 'resume', 'operator', $3, coalesce($2::timestamptz, now()) FROM d",
		New:   "SELECT service, 'resume', 'operator', (SELECT operator_id FROM paused_services WHERE service = $1), coalesce($2::timestamptz, now()) FROM d",
		What:  "a resume's audit row names the operator who paused the service, not the one who resumed it (killed by service_paused)",
		Rules: []string{"service.pause-audited"}},
}
