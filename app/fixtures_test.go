package app_test

import (
	"archive/zip"
	"bufio"
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

func pngBytes(t testing.TB) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 16, 9))
	for x := range 16 {
		img.Set(x, x%9, color.RGBA{R: uint8(x * 16), G: 80, B: 200, A: 255})
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pdfBytes is a small but complete PDF whose body has bytes that are not
// valid UTF-8, so any accidental text decoding would show.
func pdfBytes() []byte {
	return []byte("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n" +
		"2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n" +
		"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 612 792]>>endobj\n" +
		"xref\n0 4\n0000000000 65535 f \ntrailer<</Size 4/Root 1 0 R>>\nstartxref\n0\n%%EOF\n")
}

func zipWith(t testing.TB, names ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, n := range names {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("<x/>"))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func xlsxBytes(t testing.TB) []byte {
	return zipWith(t, "[Content_Types].xml", "xl/workbook.xml", "xl/worksheets/sheet1.xml")
}

func docxBytes(t testing.TB) []byte {
	return zipWith(t, "[Content_Types].xml", "word/document.xml")
}

func pptxBytes(t testing.TB) []byte {
	return zipWith(t, "[Content_Types].xml", "ppt/presentation.xml")
}

func mustTime(t testing.TB) time.Time {
	return time.Now().Add(-48 * time.Hour)
}

// shortBody sends a request that declares 1 MiB but sends 10 bytes and then
// closes the connection, returning the status (0 when none arrived).
func shortBody(t testing.TB, rawURL, method, token string) int {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/octet-stream\r\nContent-Length: 1048576\r\n\r\n0123456789",
		method, u.RequestURI(), u.Host, token)
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
