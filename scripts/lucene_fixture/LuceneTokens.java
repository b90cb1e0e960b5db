// Prints the tokens Lucene produces for each input text: the raw StandardTokenizer tokens with their types,
// and the analyzer BRIGHT's BM25 uses (pyserini's default: Anserini's DefaultEnglishAnalyzer with Porter).
// Input: one text per line, Base64 of its UTF-8 bytes. Output: one JSON object per line.
// Build and run (needs a jar with Lucene 9 and Anserini, e.g. the fat jar inside the pyserini 0.24.0 wheel):
//   java -cp anserini-fatjar.jar scripts/lucene_fixture/LuceneTokens.java < texts.b64 > tokens.jsonl
import io.anserini.analysis.DefaultEnglishAnalyzer;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.standard.StandardTokenizer;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;
import org.apache.lucene.analysis.tokenattributes.TypeAttribute;
import org.apache.lucene.util.Version;

public class LuceneTokens {
  static String quote(String s) {
    StringBuilder out = new StringBuilder("\"");
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\') out.append('\\').append(c);
      else if (c < 0x20 || (c >= 0xD800 && c <= 0xDFFF && !validSurrogate(s, i))) out.append(String.format("\\u%04x", (int) c));
      else out.append(c);
    }
    return out.append('"').toString();
  }

  static boolean validSurrogate(String s, int i) {
    char c = s.charAt(i);
    if (Character.isHighSurrogate(c)) return i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1));
    return i > 0 && Character.isHighSurrogate(s.charAt(i - 1));
  }

  static List<String[]> standard(String text) throws Exception {
    List<String[]> out = new ArrayList<>();
    try (StandardTokenizer tokenizer = new StandardTokenizer()) {
      tokenizer.setReader(new StringReader(text));
      CharTermAttribute term = tokenizer.addAttribute(CharTermAttribute.class);
      TypeAttribute type = tokenizer.addAttribute(TypeAttribute.class);
      tokenizer.reset();
      while (tokenizer.incrementToken()) out.add(new String[] {term.toString(), type.type()});
      tokenizer.end();
    }
    return out;
  }

  static List<String> analyze(Analyzer analyzer, String text) throws Exception {
    List<String> out = new ArrayList<>();
    try (TokenStream stream = analyzer.tokenStream("contents", text)) {
      CharTermAttribute term = stream.addAttribute(CharTermAttribute.class);
      stream.reset();
      while (stream.incrementToken()) out.add(term.toString());
      stream.end();
    }
    return out;
  }

  public static void main(String[] args) throws Exception {
    Analyzer english = DefaultEnglishAnalyzer.newStemmingInstance("porter");
    PrintStream stdout = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    System.err.println("lucene " + Version.LATEST);
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line; (line = in.readLine()) != null; ) {
      String text = new String(Base64.getDecoder().decode(line.trim()), StandardCharsets.UTF_8);
      StringBuilder json = new StringBuilder("{\"standard\": [");
      List<String[]> raw = standard(text);
      for (int i = 0; i < raw.size(); i++) {
        json.append(i == 0 ? "" : ", ").append('[').append(quote(raw.get(i)[0])).append(", ").append(quote(raw.get(i)[1])).append(']');
      }
      json.append("], \"english\": [");
      List<String> tokens = analyze(english, text);
      for (int i = 0; i < tokens.size(); i++) json.append(i == 0 ? "" : ", ").append(quote(tokens.get(i)));
      stdout.println(json.append("]}"));
    }
  }
}
