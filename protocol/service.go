package protocol

// Service is a named media service a device may offer and a buyer may order:
// one entry of the service catalogue (docs/SPEC.md, "Service catalogue").
// The control plane reads Name, PriceCents, Params (CreateJob checks a
// job's params against them), Media and Verify; the agent reads Runner.
type Service struct {
	Name       string
	PriceCents int64
	// Media names the structural check verification runs on the output
	// ("mp4"), before the Verify profile.
	Media string
	// Runner says how an agent renders the service.
	Runner RunnerSpec
	// Params are the parameters the service declares, sorted by name.
	// CreateJob refuses a param the service does not declare, and a
	// declared one whose value does not fit its spec (field params).
	Params []ParamSpec
	// Verify is what the output must be, checked with ffprobe after the
	// structural walk. The zero profile runs no ffprobe.
	Verify VerifyProfile
}

// Runner kinds an agent knows. A catalogue naming another kind is refused.
const (
	// RunnerSynthetic writes a deterministic synthetic MP4 (no FFmpeg).
	RunnerSynthetic = "synthetic"
	// RunnerFFmpeg renders FFmpeg's test pattern (or scales the job's
	// input) to H.264 at a fixed frame size.
	RunnerFFmpeg = "ffmpeg"
	// RunnerTranscode transcodes the job's input to H.264 or HEVC at a
	// fixed frame size and bitrate.
	RunnerTranscode = "transcode"
	// RunnerCommand runs an operator-installed composition renderer (the
	// composition runner's kind).
	RunnerCommand = "command"
)

// RunnerKinds are the runner kinds in the order the docs list them.
var RunnerKinds = []string{RunnerSynthetic, RunnerFFmpeg, RunnerTranscode, RunnerCommand}

// RunnerSpec is a service's runner: its kind and the kind's settings.
// Fields a kind does not use must be zero.
type RunnerSpec struct {
	Kind string `json:"kind"`
	// Width and Height are the output frame size (ffmpeg, transcode).
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
	// Codec is the output video codec of a transcode: h264 or hevc.
	Codec string `json:"codec,omitempty"`
	// BitrateKbps is a transcode's target video bitrate.
	BitrateKbps int `json:"bitrate_kbps,omitempty"`
	// Command is the argument vector of a command runner (no shell).
	Command []string `json:"command,omitempty"`
	// TimeoutS bounds one run of a command runner.
	TimeoutS int `json:"timeout_s,omitempty"`
}

// Param types a service may declare. On the HTTP API, integer and number
// params may be sent as JSON numbers and boolean ones as JSON booleans; the
// contract holds every param value as text, in the canonical form below.
const (
	// ParamInteger is a decimal integer ("-12", "3") within Min..Max.
	ParamInteger = "integer"
	// ParamNumber is a finite decimal number ("2.5", "1e3") within Min..Max.
	ParamNumber = "number"
	// ParamBoolean is "true" or "false".
	ParamBoolean = "boolean"
	// ParamString is text of at most MaxLen bytes (when MaxLen > 0), one of
	// Enum when Enum is set.
	ParamString = "string"
)

// ParamSpec declares one parameter of a service.
type ParamSpec struct {
	Name string
	Type string
	// Min and Max bound an integer or number (both always set for them).
	Min, Max float64
	// Enum lists a string param's allowed values (empty: any).
	Enum []string
	// MaxLen bounds a string param's bytes (0: the contract's 256).
	MaxLen int
	// Default is the value a runner uses when the job omits the param ("":
	// none), in canonical text.
	Default string
}

// VerifyProfile is what ffprobe must find in an output. Zero fields are not
// checked.
type VerifyProfile struct {
	// Container is ffprobe's format name list, e.g. "mov,mp4,m4a,3gp,3g2,mj2".
	Container string `json:"container,omitempty"`
	// Codec is the first video stream's codec_name, e.g. h264 or hevc.
	Codec string `json:"codec,omitempty"`
	// Width and Height are the first video stream's frame size.
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
	// DurationParam names the param whose value (or default) is the
	// output's expected duration in seconds: within DurationToleranceS when
	// the job has no input, at most that plus the tolerance when the job
	// has an input and set the param.
	DurationParam      string  `json:"duration_param,omitempty"`
	DurationToleranceS float64 `json:"duration_tolerance_s,omitempty"`
	// MinVideoTracks is the least number of video streams (at least 1 when
	// any other field is set).
	MinVideoTracks int `json:"min_video_tracks,omitempty"`
}

// Probes reports whether the profile asks for ffprobe at all.
func (v VerifyProfile) Probes() bool { return v != VerifyProfile{} }

// Param returns the service's declaration of name.
func (s Service) Param(name string) (ParamSpec, bool) {
	for _, p := range s.Params {
		if p.Name == name {
			return p, true
		}
	}
	return ParamSpec{}, false
}

// mp4Container is ffprobe's format_name for MP4 and QuickTime files.
const mp4Container = "mov,mp4,m4a,3gp,3g2,mj2"

// ffmpegParams are the FFmpeg test-pattern services' parameters.
var ffmpegParams = []ParamSpec{
	{Name: "crf", Type: ParamInteger, Min: 18, Max: 35, Default: "23"},
	{Name: "duration_s", Type: ParamInteger, Min: 1, Max: 60, Default: "5"},
	{Name: "preset", Type: ParamString, Enum: []string{"ultrafast", "veryfast", "fast", "medium"}, Default: "medium"},
}

func ffmpegService(name string, price int64, w, h int) Service {
	return Service{Name: name, PriceCents: price, Media: "mp4",
		Runner: RunnerSpec{Kind: RunnerFFmpeg, Width: w, Height: h},
		Params: ffmpegParams,
		// An input is scaled to the height keeping its aspect ratio, so the
		// width is not pinned.
		Verify: VerifyProfile{Container: mp4Container, Codec: "h264", Height: h,
			DurationParam: "duration_s", DurationToleranceS: 0.5, MinVideoTracks: 1}}
}

// Services is the default catalogue, used when the operator gives none.
// The built-in synthetic.mp4 service needs no FFmpeg, so tests and CI can
// run the whole pipeline; its output is a synthetic file that is not
// decodable video, so its profile is the structural walk alone.
var Services = []Service{
	{Name: "synthetic.mp4", PriceCents: 10, Media: "mp4", Runner: RunnerSpec{Kind: RunnerSynthetic},
		Params: []ParamSpec{
			{Name: "delay_ms", Type: ParamInteger, Min: 0, Max: 600_000, Default: "0"},
			{Name: "duration_ms", Type: ParamInteger, Min: 1, Max: 600_000, Default: "1000"},
			{Name: "mdat_bytes", Type: ParamInteger, Min: 1, Max: 1 << 30, Default: "4096"},
			{Name: "seed", Type: ParamString, MaxLen: 64},
		}},
	ffmpegService("ffmpeg.h264_720p", 40, 1280, 720),
	ffmpegService("ffmpeg.h264_1080p", 80, 1920, 1080),
}

// LookupService returns the default catalogue's entry named name.
func LookupService(name string) (Service, bool) { return FindService(Services, name) }

// FindService returns the entry of catalogue named name.
func FindService(catalogue []Service, name string) (Service, bool) {
	for _, s := range catalogue {
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
