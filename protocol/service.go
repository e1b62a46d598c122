package protocol

// Service is a named media service a device may offer and a buyer may order.
type Service struct {
	Name       string
	PriceCents int64
	// Media names the media check verification runs on the output ("mp4").
	Media string
}

// Services is the default catalogue. The built-in synthetic.mp4 service
// needs no FFmpeg, so tests and CI can run the whole pipeline.
var Services = []Service{
	{Name: "synthetic.mp4", PriceCents: 10, Media: "mp4"},
	{Name: "ffmpeg.h264_720p", PriceCents: 40, Media: "mp4"},
	{Name: "ffmpeg.h264_1080p", PriceCents: 80, Media: "mp4"},
}

// LookupService returns the catalogue entry named name.
func LookupService(name string) (Service, bool) {
	for _, s := range Services {
		if s.Name == name {
			return s, true
		}
	}
	return Service{}, false
}

// MaxAttemptsMin, MaxAttemptsMax and MaxAttemptsDefault bound jobs.max_attempts.
const (
	MaxAttemptsMin     = 1
	MaxAttemptsMax     = 10
	MaxAttemptsDefault = 3
)

// OutputKey is the attempt-scoped artifact key a commit must upload to.
func OutputKey(jobID, attemptID string) string { return "outputs/" + jobID + "/" + attemptID + ".mp4" }

// An output PUT is create-only: the agent sends OutputPutCondition with the
// value OutputPutCreateOnly (If-None-Match: *) with every PUT of its
// output. An S3 bucket then stores the key at most once and answers any
// later PUT of it 412 Precondition Failed (OutputPutRefusedStatus), which
// agents and the harness read as CodeOutputSealed; a presigned S3 grant
// signs the header, so a PUT without it is refused too. The control
// plane's own artifact handler fences by the attempt's claim instead and
// ignores the header (docs/semantics.md, "Artifacts on S3").
const (
	OutputPutCondition     = "If-None-Match"
	OutputPutCreateOnly    = "*"
	OutputPutRefusedStatus = 412
)

// InputKey is the artifact key of a job's input.
func InputKey(jobID string) string { return "inputs/" + jobID }
