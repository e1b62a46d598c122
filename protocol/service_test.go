package protocol

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLookupService(t *testing.T) {
	t.Parallel()
	for _, want := range []Service{
		{Name: "synthetic.mp4", PriceCents: 10, Media: "mp4", Runner: RunnerSpec{Kind: RunnerSynthetic}},
		{Name: "ffmpeg.h264_720p", PriceCents: 40, Media: "mp4", Runner: RunnerSpec{Kind: RunnerFFmpeg, Width: 1280, Height: 720}},
		{Name: "ffmpeg.h264_1080p", PriceCents: 80, Media: "mp4", Runner: RunnerSpec{Kind: RunnerFFmpeg, Width: 1920, Height: 1080}},
	} {
		got, ok := LookupService(want.Name)
		require.True(t, ok, want.Name)
		require.Equal(t, want.Name, got.Name)
		require.Equal(t, want.PriceCents, got.PriceCents)
		require.Equal(t, want.Media, got.Media)
		require.Equal(t, want.Runner, got.Runner)
	}
	for _, name := range []string{"", "synthetic", "SYNTHETIC.MP4", " synthetic.mp4", "synthetic.mp4 ", "ffmpeg", "ffmpeg.h264_4k"} {
		got, ok := LookupService(name)
		require.False(t, ok, "%q", name)
		require.Equal(t, Service{}, got)
	}

	names := map[string]bool{}
	for _, s := range Services {
		require.False(t, names[s.Name], "duplicate service %s", s.Name)
		names[s.Name] = true
		require.Positive(t, s.PriceCents, s.Name)
		require.NotEmpty(t, s.Media, s.Name)
		got, ok := LookupService(s.Name)
		require.True(t, ok)
		require.Equal(t, s, got)
	}
	require.True(t, names["synthetic.mp4"], "the FFmpeg-free service is in the default catalogue")
}

func TestArtifactKeys(t *testing.T) {
	t.Parallel()
	job := "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	a1 := "11111111-2222-4333-8444-555555555555"
	a2 := "66666666-7777-4888-9999-aaaaaaaaaaaa"
	require.Equal(t, "outputs/"+job+"/"+a1+".mp4", OutputKey(job, a1))
	require.Equal(t, "outputs/j/a.mp4", OutputKey("j", "a"))
	require.NotEqual(t, OutputKey(job, a1), OutputKey(job, a2), "output keys are attempt-scoped")
	require.Equal(t, "inputs/"+job, InputKey(job))
	require.Equal(t, "inputs/j", InputKey("j"))
	require.NotEqual(t, InputKey(job), OutputKey(job, a1))
}

func TestBounds(t *testing.T) {
	t.Parallel()
	require.LessOrEqual(t, MaxAttemptsMin, MaxAttemptsDefault)
	require.LessOrEqual(t, MaxAttemptsDefault, MaxAttemptsMax)
	require.Equal(t, 1, MaxAttemptsMin)
	require.Less(t, AdmissionWindowMin, AdmissionWindowDefault)
	require.Less(t, AdmissionWindowDefault, AdmissionWindowMax)
}
