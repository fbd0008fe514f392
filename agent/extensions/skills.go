package extensions

import (
	"path"
	"regexp"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/fsjail"
	"go.yaml.in/yaml/v3"
)

// Bounds of a skill's listing.
const (
	// MaxDescription bounds a skill's description (the Agent Skills
	// format's own limit).
	MaxDescription = 1024
	// maxSkillFiles bounds the files of a loaded skill the prompt names;
	// maxSkillDepth how deep below its folder they are looked for.
	maxSkillFiles = 50
	maxSkillDepth = 3
)

// SkillFile is the file that makes a folder a skill.
const SkillFile = "SKILL.md"

// validName is what a skill's name may be: a word of letters, digits,
// dots, dashes and underscores (the Agent Skills format asks for
// lowercase letters, digits and dashes; desk takes a little more, and
// nothing that could not be typed as an argument).
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Skill is one skill of the checkout: a folder with a SKILL.md.
type Skill struct {
	// Name is the front matter's name, else the folder's name.
	Name        string `json:"name"`
	Description string `json:"description"`
	Path        string `json:"path"` // guest path of the SKILL.md
	// Problem says why the skill cannot be loaded (its front matter does
	// not parse, its name is not valid or is taken by an earlier skill).
	Problem string `json:"problem,omitempty"`
}

// Dir is the skill's folder.
func (s Skill) Dir() string { return path.Dir(s.Path) }

// FindSkills lists the skills of roots: for each root, the subfolders of
// .agents/skills/ then of .claude/skills/ that hold a SKILL.md, by name
// within each. The first skill of a name wins; a later one is listed with
// a problem.
func FindSkills(j *fsjail.Jail, roots []string) []Skill {
	var out []Skill
	taken := map[string]string{}
	for _, root := range roots {
		for _, dir := range SkillDirs {
			ents, err := j.ReadDir(path.Join(root, dir))
			if err != nil {
				continue // no such folder, or one that leads out
			}
			for _, e := range ents {
				if e.Type != fsjail.TypeDir {
					continue
				}
				p := path.Join(e.Path, SkillFile)
				if st, err := j.Stat(p); err != nil || st.Type != fsjail.TypeFile {
					continue
				}
				s := readSkillHeader(j, p, e.Name)
				if s.Problem == "" {
					if first, ok := taken[s.Name]; ok {
						s.Problem = "the name " + s.Name + " is taken by " + first
					} else {
						taken[s.Name] = s.Path
					}
				}
				out = append(out, s)
			}
		}
	}
	return out
}

// readSkillHeader reads a SKILL.md's front matter.
func readSkillHeader(j *fsjail.Jail, p, folder string) Skill {
	s := Skill{Name: folder, Path: p}
	text, _, _, err := readBounded(j, p, MaxSkillBytes)
	if err != nil {
		s.Problem = desk.ErrorMessage(err)
		return s
	}
	fm, _, err := frontMatter(text)
	if err != nil {
		s.Problem = err.Error()
		return s
	}
	if fm.Name != "" {
		s.Name = fm.Name
	}
	s.Description = cut(strings.TrimSpace(fm.Description), MaxDescription)
	if !validName.MatchString(s.Name) {
		s.Problem = "the name " + quote(s.Name) + " is not valid: use letters, digits, '.', '-' and '_' (at most 64)"
	}
	return s
}

// header is the part of a SKILL.md's YAML front matter desk reads; other
// keys are allowed and ignored.
type header struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// frontMatter splits a SKILL.md into its YAML front matter (between a
// first line "---" and the next line "---") and its body. A file without
// front matter is all body.
func frontMatter(text string) (header, string, error) {
	var h header
	rest, ok := strings.CutPrefix(strings.TrimPrefix(text, "\ufeff"), "---")
	if !ok {
		return h, text, nil
	}
	rest = strings.TrimLeft(rest, " \t")
	rest, ok = strings.CutPrefix(strings.TrimPrefix(rest, "\r"), "\n")
	if !ok {
		return h, text, nil // "---something": not a front matter
	}
	var yml, body string
	if strings.HasPrefix(rest, "---") {
		body = rest[3:]
	} else {
		i := strings.Index(rest, "\n---")
		if i < 0 {
			return h, "", desk.Errorf(desk.EINVALID, "the front matter is not closed with a line ---")
		}
		yml, body = rest[:i+1], rest[i+4:]
	}
	// The rest of the closing line, and blank lines after it.
	if nl := strings.IndexByte(body, '\n'); nl >= 0 && strings.TrimSpace(body[:nl]) == "" {
		body = strings.TrimLeft(body[nl+1:], "\r\n")
	}
	if err := yaml.Unmarshal([]byte(yml), &h); err != nil {
		return h, "", desk.Errorf(desk.EINVALID, "the front matter is not valid YAML: %v", err)
	}
	return h, body, nil
}

// SkillText is what the prompt carries of a loaded skill.
type SkillText struct {
	Skill
	Digest    string
	Body      string // SKILL.md without its front matter, bounded
	Truncated bool
	Size      int64
	// Files are the guest paths of the skill's other files (at most
	// maxSkillFiles, up to maxSkillDepth below its folder); More counts
	// the ones left out.
	Files []string
	More  int
}

// ReadSkill reads a skill (as FindSkills lists it, or as a surface
// loaded it: name and path) for the prompt.
func ReadSkill(j *fsjail.Jail, s Skill) (SkillText, error) {
	t := SkillText{Skill: s}
	text, digest, size, err := readBounded(j, s.Path, MaxSkillBytes+1)
	if err != nil {
		return t, err
	}
	t.Digest, t.Size = digest, size
	h, body, err := frontMatter(text)
	if err != nil {
		return t, err
	}
	if d := strings.TrimSpace(h.Description); d != "" {
		t.Description = cut(d, MaxDescription)
	}
	if size > MaxSkillBytes {
		body, t.Truncated = cut(body, len(body)-1), true
	}
	t.Body = body
	t.Files, t.More = listFiles(j, s.Dir(), 0, nil, 0)
	return t, nil
}

// listFiles walks a skill's folder through the jail (links that lead out
// are never listed: the jail leaves them out).
func listFiles(j *fsjail.Jail, dir string, depth int, out []string, more int) ([]string, int) {
	ents, err := j.ReadDir(dir)
	if err != nil {
		return out, more
	}
	for _, e := range ents {
		switch {
		case e.Type == fsjail.TypeDir:
			if depth+1 < maxSkillDepth {
				out, more = listFiles(j, e.Path, depth+1, out, more)
			}
		case depth == 0 && e.Name == SkillFile:
		case len(out) >= maxSkillFiles:
			more++
		default:
			out = append(out, e.Path)
		}
	}
	return out, more
}

func quote(s string) string { return `"` + s + `"` }
