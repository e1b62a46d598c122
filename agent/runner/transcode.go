package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
)

// Transcode re-encodes the job's input to H.264 or HEVC at a fixed frame
// size and bitrate. On darwin it asks for the VideoToolbox encoder first
// (h264_videotoolbox, hevc_videotoolbox: the Mac's media engine) and, when
// that run fails, runs once more with the software encoder (libx264,
// libx265); elsewhere it uses the software encoder alone. The encoder that
// produced the output is named in the file's video stream (ffmpeg writes
// its "encoder" tag), which the server reads with ffprobe and records on
// the attempt.
//
// Parameters: duration_s (1..3600): cut the output to this length.
type Transcode struct {
	// Path is the ffmpeg binary ("" means ffmpeg on PATH).
	Path string
	// GOOS chooses the encoders ("" is not darwin).
	GOOS string
	// Codec is h264 or hevc.
	Codec string
	// Width, Height and BitrateKbps are the output's.
	Width, Height, BitrateKbps int
	// Used, when set, is told the encoder that produced the output.
	Used func(encoder string)
}

// Transcode parameter limits.
const transcodeDurationMaxS = 3600

// TranscodeParams are a transcode's validated parameters.
type TranscodeParams struct {
	// DurationS cuts the output (0: the whole input).
	DurationS int
}

// ParseTranscodeParams validates params for a transcode service.
func ParseTranscodeParams(params map[string]string) (TranscodeParams, error) {
	var p TranscodeParams
	if err := checkKnown(params, "duration_s"); err != nil {
		return p, err
	}
	var err error
	p.DurationS, err = intParam(params, "duration_s", 1, transcodeDurationMaxS, 0)
	return p, err
}

// Encoders are the encoders a transcode tries for codec on goos, in
// order: VideoToolbox then software on darwin, software alone elsewhere.
func Encoders(goos, codec string) []string {
	software := map[string]string{"h264": "libx264", "hevc": "libx265"}[codec]
	if goos == "darwin" {
		return []string{codec + "_videotoolbox", software}
	}
	return []string{software}
}

// TranscodeArgs is the argument vector (without the binary) for one run
// with encoder. Only validated numbers, the encoder from Encoders and the
// agent's own absolute paths vary.
func (t Transcode) TranscodeArgs(encoder string, p TranscodeParams, inputPath, outputPath string) ([]string, error) {
	switch {
	case t.Width <= 0 || t.Height <= 0 || t.BitrateKbps <= 0:
		return nil, fmt.Errorf("transcode runner: frame %dx%d at %d kb/s is not configured", t.Width, t.Height, t.BitrateKbps)
	case inputPath == "":
		return nil, &ParamError{Param: "input", Reason: "a transcode needs the job's input file"}
	case !filepath.IsAbs(inputPath) || !filepath.IsAbs(outputPath):
		return nil, errors.New("transcode runner: input and output paths must be absolute")
	}
	w, h, kbps := strconv.Itoa(t.Width), strconv.Itoa(t.Height), t.BitrateKbps
	args := []string{"-nostdin", "-hide_banner", "-loglevel", "error", "-y",
		"-protocol_whitelist", "file", "-format_whitelist", inputFormats, "-i", inputPath}
	if p.DurationS > 0 {
		args = append(args, "-t", strconv.Itoa(p.DurationS))
	}
	// Fit the frame inside WxH keeping the aspect ratio, then pad to
	// exactly WxH, so the output's size is the service's whatever the input.
	vf := "scale=" + w + ":" + h + ":force_original_aspect_ratio=decrease,pad=" + w + ":" + h + ":(ow-iw)/2:(oh-ih)/2,setsar=1"
	args = append(args, "-vf", vf, "-c:v", encoder, "-b:v", strconv.Itoa(kbps)+"k",
		"-maxrate", strconv.Itoa(kbps)+"k", "-bufsize", strconv.Itoa(2*kbps)+"k")
	switch encoder {
	case "libx264":
		args = append(args, "-preset", "medium")
	case "libx265":
		args = append(args, "-preset", "medium", "-x265-params", "log-level=error")
	case "h264_videotoolbox", "hevc_videotoolbox":
		// Hardware only: a Mac without the engine fails this run and the
		// runner falls back to the software encoder explicitly.
		args = append(args, "-allow_sw", "0")
	}
	if t.Codec == "hevc" {
		args = append(args, "-tag:v", "hvc1") // what QuickTime and Safari play
	}
	args = append(args, "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "128k",
		"-movflags", "+faststart", "-f", "mp4", outputPath)
	return args, nil
}

// Run transcodes inputPath, trying each of Encoders(GOOS, Codec) until one
// succeeds; a failure of the last is the error. ctx ending stops at once.
func (t Transcode) Run(ctx context.Context, spec Spec, inputPath, outputPath string) error {
	p, err := ParseTranscodeParams(spec.Params)
	if err != nil {
		return err
	}
	bin, err := findFFmpeg(t.Path)
	if err != nil {
		return err
	}
	var errs []error
	for _, enc := range Encoders(t.GOOS, t.Codec) {
		args, err := t.TranscodeArgs(enc, p, inputPath, outputPath)
		if err != nil {
			return err
		}
		err = runFFmpeg(ctx, bin, args)
		if err == nil {
			if t.Used != nil {
				t.Used(enc)
			}
			return nil
		}
		if errors.Is(err, errStopped) {
			return err
		}
		errs = append(errs, fmt.Errorf("ffmpeg with %s: %w", enc, err))
	}
	return errors.Join(errs...)
}
