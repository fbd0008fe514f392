package classify

import (
	"github.com/desk-runtime/desk"
)

// Strict claims. These kinds are opened by dedicated viewers that fail badly
// (or unsafely) on anything else, so a file claiming to be one must be one.
var (
	extensionClaims = map[string]string{
		".png":  PNG,
		".jpg":  JPEG,
		".jpeg": JPEG,
		".pdf":  PDF,
		".xlsx": XLSX,
		".docx": DOCX,
	}
	mediaTypeClaims = map[string]string{
		"image/png":           PNG,
		"image/jpeg":          JPEG,
		"image/jpg":           JPEG, // not registered, but common enough to be meant as JPEG
		"application/pdf":     PDF,
		kinds[XLSX].mediaType: XLSX,
		kinds[DOCX].mediaType: DOCX,
	}
	claimNames = map[string]string{PNG: "PNG", JPEG: "JPEG", PDF: "PDF", XLSX: "XLSX", DOCX: "DOCX"}
)

// Check refuses bytes whose name (by extension) or media type claims one of
// the strict kinds PNG, JPEG, PDF, XLSX or DOCX while the bytes are something
// else. Empty content is never refused (an empty file is a legitimate
// placeholder). The error is *desk.Error with code desk.EINVALID and a
// message that names the file, the claim and what the bytes really are, e.g.
//
//	"report.pdf": the name says PDF but the bytes are a PNG image
//	"x.bin": the media type image/png says PNG but the bytes are plain text
//
// A claim is satisfied only by the exact kind: a DOCX named .xlsx is refused
// even though both are ZIP packages.
func Check(name, mediaType string, res Result) error {
	if res.Kind == Empty {
		return nil
	}
	if claim, ok := extensionClaims[ext(name)]; ok && claim != res.Kind {
		return desk.Errorf(desk.EINVALID, "%q: the name says %s but the bytes are %s",
			name, claimNames[claim], Describe(res.Kind))
	}
	mt := baseMediaType(mediaType)
	if claim, ok := mediaTypeClaims[mt]; ok && claim != res.Kind {
		return desk.Errorf(desk.EINVALID, "%q: the media type %s says %s but the bytes are %s",
			name, mt, claimNames[claim], Describe(res.Kind))
	}
	return nil
}
