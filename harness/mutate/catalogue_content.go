package mutate

// contentMutants break verification by content: the MP4 media check
// (internal/mp4) and the verifier and upload seal around it (server). Each
// is killed by the scenarios 56-60 (verification by content) of the
// bounded qualify gate, as `rendermac mutate --only ID` shows.
var contentMutants = []Mutant{
	{ID: "mp4-movie-box-optional", Kind: "media-check", File: "internal/mp4/check.go",
		Old:  "\tcase !w.moov:\n\t\treturn Info{}, ErrMissingMoov\n\tcase !w.mvhd:\n\t\treturn Info{}, ErrMissingMvhd\n\tcase w.info.Tracks == 0:\n\t\treturn Info{}, ErrNoTracks\n",
		New:  "",
		What: "the media check requires no moov (nor mvhd, nor trak): ftyp then mdat verifies", Rules: []string{"verify.mp4"}},
	{ID: "mp4-no-track-check", Kind: "media-check", File: "internal/mp4/check.go",
		Old: "\tcase w.info.Tracks == 0:\n\t\treturn Info{}, ErrNoTracks\n", New: "",
		What: "the media check accepts a moov of no trak: a movie with nothing to play verifies", Rules: []string{"verify.mp4"}},
	{ID: "mp4-mdat-bound-off", Kind: "media-check", File: "internal/mp4/check.go",
		Old: "if size > end-off {", New: "if size > end-off && h.typ != \"mdat\" {",
		What: "an mdat may declare more bytes than the file holds: a render cut short verifies", Rules: []string{"verify.mp4"}},
	{ID: "media-verdict-unjudged", Kind: "verification", File: "server/artifact/verify.go",
		Old: "if errors.Is(err, mp4.ErrInvalid) {", New: "if errors.Is(err, context.Canceled) {",
		What: "a failed media check is taken for a store error: the commit is left unjudged instead of failed", Rules: []string{"commit.verification-failed"}},
	{ID: "verify-skips-media-check", Kind: "verification", File: "server/fencing/commit.go",
		Old: "claimed.Bytes, claimed.SHA256, svc.Media)", New: "claimed.Bytes, claimed.SHA256, svc.Media[:0])",
		What: "commit verification checks size and digest but not the media", Rules: []string{"verify.mp4", "commit.verification-failed"}},
	{ID: "upload-open-while-committing", Kind: "seal", File: "server/fencing/upload.go",
		Old: "case !status.LeasePhase() && !s.v.noOutputSeal():", New: "case !status.LeasePhase() && status != protocol.AttemptCommitting && !s.v.noOutputSeal():",
		What: "an upload is published while its attempt is committing: a PUT between the claim and verification replaces what is verified", Rules: []string{"artifact.output-sealed", "artifact.publish-order", "inv.8"}},
}

func init() { Catalogue = append(Catalogue, contentMutants...) }
