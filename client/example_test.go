package client_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/rendermac/rendermac/client"
)

// Submit a file for transcoding, wait for the job, and download its output
// with the SHA-256 checked: what `rendermac jobs submit --input in.mp4
// --service ffmpeg.h264_720p --wait --download out.mp4` does.
func Example() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080", os.Getenv("RENDERMAC_API_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	up, err := c.UploadFile(ctx, "in.mp4", nil)
	if err != nil {
		log.Fatal(err)
	}
	created, err := c.Create(ctx, client.CreateRequest{Service: "ffmpeg.h264_720p",
		Params: map[string]string{"preset": "fast"}, InputID: up.InputID})
	if err != nil {
		log.Fatal(err) // an *client.Error: its Code is the API's (validation_error, insufficient_funds...)
	}
	job, err := c.Wait(ctx, created.Job.ID, client.WaitOptions{})
	if err != nil {
		log.Fatal(err)
	}
	if job.Status != "succeeded" {
		log.Fatalf("job %s %s: %s", job.ID, job.Status, job.FailureCode)
	}
	if _, err := c.DownloadFile(ctx, job, "out.mp4", nil); err != nil {
		log.Fatal(err) // an *client.IntegrityError when the bytes are not the output's
	}
}

// List every job that failed, newest first, page after page.
func ExampleClient_List() {
	c, err := client.New("https://render.example.com", os.Getenv("RENDERMAC_API_KEY"),
		client.WithHTTPClient(&http.Client{Timeout: time.Minute}))
	if err != nil {
		log.Fatal(err)
	}
	for job, err := range c.List(context.Background(), client.ListOptions{Status: "failed"}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(job.ID, job.FailureCode)
	}
}

// A webhook receiver: verify the signature over the exact body bytes
// before trusting the delivery.
func ExampleVerifyWebhook() {
	secret := os.Getenv("RENDERMAC_WEBHOOK_SECRET") // whsec_..., from rendermac admin webhook-secret
	http.HandleFunc("/rendermac", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		if err := client.VerifyWebhook(secret, r.Header, body, time.Now()); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		// webhook-id is the same on every retry of one event: deduplicate on it.
		w.WriteHeader(http.StatusNoContent)
	})
}
