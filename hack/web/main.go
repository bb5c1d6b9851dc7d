// Command web is the tiny HTTP server the kind cluster's WebApps run
// (hack/image.sh builds it into an image FROM scratch): it answers every
// request on :8080 (PORT) with its pod's name, so a test can tell that a
// Service really routed to a pod.
//
// With -get URL it is instead the client the e2e suite runs in Jobs inside
// the cluster (the image has no shell and no curl): it GETs URL until it has
// seen -times matching responses in a row, each on a new connection, or
// -deadline passes, and exits 0 or 1. A response matches when its status is
// -want ("any" for any status) and, with -cert-sha256, the server's leaf
// certificate has that SHA-256 (hex) fingerprint. Every attempt is logged to
// stderr as `status=<code> cert-sha256=<hex>`; the body of the last matching
// response goes to stdout.
//
//	web -get http://app.ns.svc/
//	web -get https://svc.ns.svc:8443/metrics -insecure -bearer-file /var/run/secrets/kubernetes.io/serviceaccount/token -want 403
package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	get := flag.String("get", "", "client mode: GET this URL instead of serving")
	want := flag.String("want", "200", `client mode: the HTTP status that matches, or "any"`)
	bearerFile := flag.String("bearer-file", "", "client mode: send the content of this file as a bearer token")
	insecure := flag.Bool("insecure", false, "client mode: do not verify the server's certificate")
	certSHA := flag.String("cert-sha256", "", "client mode: a match also needs the server's leaf certificate to have this SHA-256 (hex)")
	times := flag.Int("times", 1, "client mode: matching responses needed in a row")
	deadline := flag.Duration("deadline", time.Minute, "client mode: give up after this long")
	flag.Parse()
	if *get != "" {
		os.Exit(fetch(*get, *want, *bearerFile, *certSHA, *insecure, *times, *deadline))
	}
	serve()
}

func serve() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	host, _ := os.Hostname()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "webapp %s %s\n", host, r.URL.Path)
	})
	log.Printf("listening on :%s", port)
	log.Fatal(http.ListenAndServe(":"+port, nil))
}

// fetch is the client mode; it returns the exit code.
func fetch(url, want, bearerFile, certSHA string, insecure bool, times int, deadline time.Duration) int {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	c := &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			// A new connection every time, so that a Service picks a
			// backend for each attempt.
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: insecure}, //nolint:gosec // -insecure: the caller checks the certificate by fingerprint
		},
	}
	inARow := 0
	for attempt := 1; ; attempt++ {
		ok, body := try(ctx, c, url, want, bearerFile, certSHA, attempt)
		if ok {
			inARow++
			if inARow >= times {
				fmt.Print(body)
				return 0
			}
		} else {
			inARow = 0
		}
		select {
		case <-ctx.Done():
			log.Printf("no %d matching responses in a row from %s within %v", times, url, deadline)
			return 1
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// try makes one request and says whether its response matches.
func try(ctx context.Context, c *http.Client, url, want, bearerFile, certSHA string, attempt int) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		log.Fatal(err)
	}
	if bearerFile != "" {
		// Read every time: the kubelet rotates projected tokens.
		token, err := os.ReadFile(bearerFile)
		if err != nil {
			log.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	resp, err := c.Do(req)
	if err != nil {
		log.Printf("attempt %d: %v", attempt, err)
		return false, ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		log.Printf("attempt %d: status=%d reading the body: %v", attempt, resp.StatusCode, err)
		return false, ""
	}
	sum := "none"
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		s := sha256.Sum256(resp.TLS.PeerCertificates[0].Raw)
		sum = hex.EncodeToString(s[:])
	}
	log.Printf("attempt %d: status=%d cert-sha256=%s", attempt, resp.StatusCode, sum)
	if want != "any" && want != strconv.Itoa(resp.StatusCode) {
		return false, ""
	}
	if certSHA != "" && !strings.EqualFold(certSHA, sum) {
		return false, ""
	}
	return true, string(b)
}
