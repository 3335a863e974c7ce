# Doxygen's input filter for the installed headers (the gat_docs target, CMakeLists.txt). The headers
# document themselves in plain // comments; this turns "// text" into "/// text" and the comment block
# that opens a file into that file's description (@file). Comment text is plain text, not
# Doxygen markup: outside `code spans` it escapes the characters Doxygen would read as commands,
# HTML tags or entities (\ @ < > &).
function plain(text,    parts, n, i, out) {
  n = split(text, parts, "`")
  out = ""
  for (i = 1; i <= n; i++) {
    if (i % 2 == 1) gsub(/[\\@<>&]/, "\\\\&", parts[i])
    out = out (i > 1 ? "`" : "") parts[i]
  }
  return out
}
NR == 1 && /^[ \t]*\/\/( |$)/ { print "/// @file" }
/^[ \t]*\/\/( |$)/ {
  match($0, /^[ \t]*\/\//)
  print substr($0, 1, RLENGTH) "/" plain(substr($0, RLENGTH + 1))
  next
}
{ print }
