"""memory_extract's cue rules (REQ-MEM-FN-021): the words that mark a segment as one memory type, the
headings that say what the lines under them are, and the prototype sentences the local model compares
segments with.

The rules are linguistic, not phrase lists of one corpus: who says it (the user states preferences, the
assistant proposes, a code comment or commit body states conventions), decision verbs and their
objects, "must/shall/has to" requirements versus "never/do not <programming verb>" conventions, the
result formats of pytest, jest/vitest, go test and cargo, and the labels writers put before what they
record ("Decision:", "Agreed:", "NOTE:", "Testing:"). Each cue says why it is there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_I = re.IGNORECASE


@dataclass(frozen=True)
class Cue:
    """Words that mark a segment as one memory type, with how sure they make it."""

    memory_type: str
    weight: float
    pattern: re.Pattern[str]
    roles: tuple[str | None, ...] | None = None
    """Whose words it must be (``user``, ``assistant``, ``None`` for text without a speaker); None: anyone's."""
    kinds: tuple[str, ...] | None = None
    """The segment kinds it applies to (``prose``, ``comment``, ``tool`` ...); None: every kind but ``tool``."""


def _cue(memory_type: str, weight: float, pattern: str, roles: tuple[str | None, ...] | None = None, flags: int = _I,
         kinds: tuple[str, ...] | None = None) -> Cue:
    return Cue(memory_type, weight, re.compile(pattern, flags), roles, kinds)


# Verbs of writing code: "never <verb>", "always <verb>" and "must (not) be <verb>ed" with one of these
# are conventions of the code base (code_pattern), not product requirements.
_CODE_VERBS = (
    r"call|use|hold|wrap|import|pass|close|commit|await|mock|block|mutate|catch|swallow|hardcode|edit|modify|"
    r"lock|share|reuse|spawn|retry|access|cache|sort|release|acquire|validate|verify|check|escape|pin|log|"
    r"parse|serialize|serialise|compare|instantiate|subclass|override|inline|return|throw|raise"
)
_CODE_PARTICIPLES = (
    r"called|used|held|wrapped|imported|passed|closed|committed|awaited|mocked|invoked|run|accessed|"
    r"initiali[sz]ed|released|acquired|locked|shared|reused|cached|sorted|mutated|instantiated|created|"
    r"registered|configured|set up|torn down|disposed"
)
_TEST_LABEL = r"(?:testing|tests?|tested|test results?|test plan|verification|verified|validation|benchmarks?|load test|soak test)"

CUES: tuple[Cue, ...] = (
    # -- decisions → design ---------------------------------------------------------------------
    # a decision verb with its deciders, or a "Decision:/Agreed:/Resolution:" label (meeting notes)
    _cue("design", 0.85, r"\b(we|i|team|they)\s+(have\s+|had\s+|finally\s+)?(decided|chose|agreed|settled|opted|went with|picked|landed on)\b"
                         r"|^\W*(decisions?|agreed|resolution|outcome|resolved)\s*:|\bdecided (to|on|that|against)\b"),
    _cue("design", 0.8, r"\b(going forward|from now on|henceforth)\b", ("assistant", None)),
    _cue("design", 0.8, r"\b(we|we'll|we will|we're going to|we are going to|let's|the team will)\s*(now\s+)?(use|go with|switch to|adopt|stick with|move to|migrate to|standardi[sz]e on|keep using|rely on)\b"),
    # the user picking: "ok, go with X", "stick with Y" (an imperative choice addressed to the assistant)
    _cue("design", 0.8, r"^\W*(let's\s+)?(go with|stick with|switch to|settle on|pick|choose)\b", ("user",)),
    _cue("design", 0.75, r"\b(use[sd]?|using|switch(ed|ing)? to|adopt(ed)?|mov(e|ed|ing) to|migrat(e|ed|ing) to|replac(e|ed|ing) \S+ with|go(ing)? with|went with)\b.{0,80}\b(instead of|rather than)\b"),
    # a new state of the system and the old one it replaces ("the queue is now X ... instead of Y")
    _cue("design", 0.75, r"\b(is|are) now\b.{0,160}\b(instead of|rather than|no longer)\b"),
    _cue("design", 0.75, r"\bBREAKING CHANGE\b|\bADR[- ]?\d+\b|\bno longer (use|support|rel(y|ies) on)\b", flags=0),
    # a requirement followed by how the code meets it ("must be idempotent: we record the id ...") is the design
    _cue("design", 0.8, r"\b(must|shall)\b[^.;]{0,80}[:;]\s*we\s+(?!think|believe|guess|feel|want|need|have|know|must|should|can|could|will|would|might|may|are|were|do|don't)[a-z]+s?\b"),
    # architecture vocabulary: who owns the truth, who wins a conflict, which consistency
    _cue("design", 0.7, r"\b(single )?source of truth\b|\blast[- ]writer[- ]wins\b|\b(server|client|local|remote) (copy|version|value) wins\b"
                        r"|\beventual(ly)? consisten|\bat[- ]least[- ]once\b|\bexactly[- ]once\b"),
    _cue("design", 0.65, r"\b(i'll|i will|i'm going to)\s+(use|go with|switch to|adopt)\b(?!.*\b(tool|command|grep|read|edit)\b)", ("assistant",)),
    # -- requirements ---------------------------------------------------------------------------
    _cue("requirements", 0.9, r"\bREQ-[A-Z0-9]+(-[A-Z0-9]+)*-\d{3,}\b.{0,200}\b(must|shall|required)\b|\b(must|shall)\b.{0,200}\bREQ-[A-Z0-9]+(-[A-Z0-9]+)*-\d{3,}\b", flags=0),
    _cue("requirements", 0.85, r"^\W*(requirement|REQ-[A-Z0-9]+(-[A-Z0-9]+)*-\d{3,})\s*[:—-]"),
    _cue("requirements", 0.75, r"\b(must|shall)( not| never| always)?\b(?!\s+(first|now)\b)"),
    # "has to / have to" states an obligation like must (not "would have to": a hypothetical; not "I/you have to": a chore)
    _cue("requirements", 0.7, r"(?<!would )(?<!'d )(?<!\bi )(?<!you )\b(has|have) to (be|stay|remain|keep|include|support|run|return|respond|reject|accept|hold|match|end|start|survive|work)\b"),
    _cue("requirements", 0.6, r"\b(is|are) required to\b|\bmust be (able|supported)\b"),
    # an invariant ("X is never used") or a limit with a number ("at most 96 characters")
    _cue("requirements", 0.6, r"\b(is|are) (never|always) (used|allowed|accepted|sent|stored|shown|returned|exposed|logged)\b"
                              r"|\b(at most|at least|no more than|no less than|not exceed)\s+~?\d"),
    # -- preferences, in the user's own words (or reported by the assistant) ---------------------
    _cue("user_preference", 0.85, r"\bI\s+(really\s+|strongly\s+|generally\s+|always\s+)?(prefer|like|want|'d like|would like|'d rather|would rather|hate|dislike|don't like|do not like)\b"
                                  r"|\bI'd\s+(really\s+)?(rather|prefer|like)\b", ("user", None)),
    # a standing instruction in the user's imperative: it holds beyond this task ("leave X alone", "ask me before
    # adding ...", "explain any change to ... before making it", "short bullets from now on")
    _cue("user_preference", 0.8, r"^\W*(also,?\s+|and\s+|one thing:\s*)?(leave|keep|ask me|tell me|check with me|explain|use|write|put|run|"
                                 r"don't|do not|never|always|stop|avoid|no)\b.{0,120}\b(alone|before (\w+ing|making|you)|unless|from now on|"
                                 r"any(one|thing)?|every|whenever|each time|in future)\b"
                                 r"|\bfrom now on\b|\bgoing forward\b", ("user",)),
    _cue("user_preference", 0.85, r"\b(please|pls)\s+(always|never|don't|do not|stop|avoid|keep|use|write|make sure)\b|\bmy preference\b|\bfor me\b", ("user",)),
    _cue("user_preference", 0.8, r"^\W*(always|never|don't|do not|stop|avoid)\b", ("user",)),
    # a standing instruction to the assistant: it holds "every time", "by default", "unless I ask", "when you X, Y"
    _cue("user_preference", 0.8, r"\b(every time|each time|unless I (ask|say)|by default|in (the )?future|next time|whenever you)\b"
                                 r"|\bwhen you \w+[^,]{0,60},\s*(please\s+)?(always\s+)?(list|use|keep|write|put|skip|start|include|mention|show|give|add|avoid|don't|do not|never)\b", ("user",)),
    # how the user wants the assistant's own output written (commit messages, answers, summaries)
    _cue("user_preference", 0.75, r"\b(keep|write|make|put|format|phrase|answer|reply|respond|explain|summari[sz]e)\b.{0,40}\b(commit messages?|answers?|replies|responses?|explanations?|summar(y|ies)|PR (titles?|descriptions?)|changelog entries)\b"
                                  r"|\b(commit messages?|answers?|replies|responses?|explanations?|summar(y|ies))\b.{0,30}\b(in the imperative|short|brief|briefly|concise|terse)\b", ("user",)),
    _cue("user_preference", 0.75, r"\b(the user|you)\s+(prefers?|wants?|likes?|asked (me )?to always|asked me never)\b", ("assistant",)),
    # -- test results ---------------------------------------------------------------------------
    # pytest, jest/vitest, go test and cargo result lines
    _cue("test_history", 0.85, r"\b\d+\s+(tests?\s+)?(passed|failed|failing|errors?|skipped|xfailed)\b|\bFAILED\s+\S+::\S+|\b(PASSED|FAILED|ERROR)\b\s+\S+\.py"
                               r"|\bTest (Files|Suites)\s+\d+\s+(passed|failed)|^\W*Tests?:\s+\d+\s+(passed|failed)|\bFAIL\s+\S+\.(test|spec)\.\w+"
                               r"|^\W*(--- FAIL: \w+|FAIL\s+\S+\s+[\d.]+s|ok\s+\S+\s+[\d.]+s)|\btest result: (ok|FAILED)\b|\btest \S+ \.\.\. (ok|FAILED)\b",
         flags=re.MULTILINE, kinds=("prose", "tool", "comment", "subject", "trailer")),
    _cue("test_history", 0.85, r"\b\d+\s+(tests?\s+)?(passed|failed|failing|errors?)\b"),
    _cue("test_history", 0.8, r"\bflaky\b|\btest_\w+\s+(now\s+)?(fails|failed|passes|passed|is failing|was failing|times out|timed out)\b|\b(all|the)\s+(\w+\s+)?tests?\s+(now\s+)?(pass|passed|are green|fail|failed|are failing)\b|\bfixed (the )?(failing|flaky|broken) tests?\b"),
    # a labelled test report ("Testing: ...", "Test: ... green") and a regression test's story
    _cue("test_history", 0.8, r"^\W*" + _TEST_LABEL + r"\s*:\s+\S|\bregression (test )?(for|of)\b"),
    _cue("test_history", 0.75, r"\b(tests?|suite|ci|build|pipeline)\b.{0,60}\b(green|red)\b|\bgreen\b.{0,20}\b\d[\d,]*\s+tests\b"),
    # a load, soak or benchmark run with its measured outcome
    _cue("test_history", 0.8, r"\b(load|soak|stress|perf|performance|integration|e2e|smoke|property) (test|tests|run)\b.{0,160}"
                              r"(\b\d[\d.,]*\s*(ms|s|min|minutes|MB|GB|rps|%)\b|\bp\d\d\b|\bzero\b|\bno errors\b|\bpass(ed|es)?\b|\bfail(ed|s)?\b|\bOOM)"),
    # a model evaluation or measurement re-run with its figures ("re-trained ...: AUC 0.77")
    _cue("test_history", 0.75, r"\b(re-?ran|re-?run|re-?trained|re-?evaluated|measured|benchmarked)\b.{0,80}\b(AUC|F1|accuracy|precision|recall|p50|p95|p99|latency|throughput|RSS)\b"),
    # -- conventions and gotchas → code_pattern --------------------------------------------------
    _cue("code_pattern", 0.8, r"\b(gotcha|pitfall|footgun|caveat|watch out|beware|be careful|careful:|the trick is|turns out|it turned out|lesson learned)\b"),
    # "make that the rule", "by convention", "in this codebase": a rule for the code from here on
    _cue("code_pattern", 0.8, r"\bmake (that|this|it) (the|a|our) (rule|convention|standard|default)\b|\b(as a rule|rule of thumb|by convention)\b"
                              r"|\bin (this|our|the) (codebase|code base|repo|repository)\b.{0,40}\b(always|never|we)\b"),
    _cue("code_pattern", 0.7, r"\b(the|our|a|this)\s+(convention|pattern|idiom)\s+(is|here is|we use|for)\b|\b(convention|pattern|idiom)\s*:"),
    # "never/do not <code verb>" (not "must never ...": that one is a requirement)
    _cue("code_pattern", 0.8, r"(?<!must )(?<!shall )(?<!should )(?<!will )\b(do not|don't|never|avoid)\s+(" + _CODE_VERBS + r")\b", ("assistant", None)),
    _cue("code_pattern", 0.75, r"\balways\s+(" + _CODE_VERBS + r")\b", ("assistant", None)),
    _cue("code_pattern", 0.75, r"\balways\s+(" + _CODE_VERBS + r")\b.{0,60}\b(order|before|after|first)\b", ("user",)),
    # a calling contract: "must not be called on the main thread", "must be awaited before ..."
    _cue("code_pattern", 0.8, r"\b(must|should|has to|have to|needs to)( not| never| only| always)? be (" + _CODE_PARTICIPLES + r")\b"
                              r"(?=.{0,40}\b(on|in|from|before|after|inside|outside|within|with|by|once|twice|first|directly|only)\b)"),
    # an annotation that warns the next reader: "NOTE:", "IMPORTANT:", "Note for future changes:"
    _cue("code_pattern", 0.65, r"^\W*(note|nb|n\.b\.|important|warning|heads[- ]up)\b[^:]{0,30}:", (None, "assistant")),
    # a silent failure mode is a gotcha ("join_asof silently gives wrong results")
    # (not "would silently ...": a hypothetical, said when weighing an option)
    _cue("code_pattern", 0.7, r"(?<!would )(?<!could )(?<!might )\b(silently|quietly) (\w+ ){0,2}(gives?|returns?|drops?|skips?|ignores?|fails?|breaks?|truncates?|corrupts?|swallows?|wrong)\b"
                              r"|\bwithout (any |a )?(warning|error)\b"),
    # a practice justified by an incident in parentheses ("review it by hand (we lost ~40 s of writes the first time)")
    _cue("code_pattern", 0.7, r"\S.{10,}\([^)]*\b(destroyed|wiped|corrupted|took down|caused (an |the )?(outage|incident)|bit us|we lost|broke)\b[^)]*\)", (None, "assistant")),
    # an imperative code comment with an ordering ("Verify the signature on the raw bytes, before json.loads")
    _cue("code_pattern", 0.75, r"^\W*(" + _CODE_VERBS + r"|keep|set|flush|normali[sz]e|convert|hash|sign|encode|decode|read|write)\b.{0,120}\b(before|after|first|only)\b",
         (None,), kinds=("comment",)),
    _cue("code_pattern", 0.5, r"\b(pattern|convention|idiom)\b"),
    # an order between steps ("BUSY must be low before NSS goes low", "SystemClock_Config() has to run again before
    # UART2 is touched", "content must be built before the player"), not said by the user: a convention of how the
    # code is used, not a product requirement (a limit or a duty without an order stays a requirement)
    _cue("code_pattern", 0.8, r"\b(must|has to|have to|needs? to|should)\b( not| never| always| only)?\b.{0,80}\b(before|after|until|first|or (else )?(the|it|you))\b",
         (None, "assistant"), kinds=("comment", "prose", "body")),
    # a new state of the system stated without decision words, in a commit, a note or a diff: "X is now Y",
    # "X now runs on Y", "X happens at Y, not in Z", "X comes in over Kafka instead of the nightly CSV"
    _cue("design", 0.45, r"^(?!.*\b(could|might|maybe|perhaps|consider|what if|if we|would|should we|option)\b)(?!\W*(i|we|you|it|this|that|the tests?)\b)"
                        r".{8,}\b((is|are) now\b|(is|are) \S+(-\S+)? now\b|now (\w+s|lives?|runs?|goes|sleeps|uses)\b|\binstead of\b|, not (in|by|on|at|from|via|through|a|an|the)\b)",
         (None,)),
)

HEADING_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    # open items, questions and out-of-scope sections hold nothing decided
    (re.compile(r"\b(open (questions?|items?|issues?|points?)|questions?|not in this (pr|change|commit)|out of scope|follow[- ]?ups?|next steps|to ?dos?|unresolved|parking lot|action items?)\b", _I), "skip"),
    (re.compile(r"\b(decisions?|adr|architecture|design)\b", _I), "design"),
    (re.compile(r"\b(requirements?)\b", _I), "requirements"),
    (re.compile(r"\b(preferences?)\b", _I), "user_preference"),
    (re.compile(r"\b(gotchas?|pitfalls?|lessons?|learnings?|patterns?|conventions?)\b", _I), "code_pattern"),
    (re.compile(r"\b(test results?|tests?|testing|verification|benchmarks?)\b", _I), "test_history"),
)
"""A Markdown heading, a title line (or a commit trailer key) that says what the lines under it are;
``skip``: nothing under it is kept."""

PROTOTYPES: dict[str, tuple[str, ...]] = {
    "design": (
        "We decided to use one library instead of another for this part of the system.",
        "Design decision: store the data in this database and accept the trade-off.",
        "The architecture choice is that this service owns the queue.",
        "Sessions are kept in Redis from now on, not in the application's memory.",
        "The import job now runs as a background worker fed by a queue.",
        "Going with server-sent events for live updates; websockets are not worth it here.",
        "Pagination is cursor-based now, keyed on the creation time and the id.",
        "Option two then: cache the rendered page at the edge and purge it on publish.",
        "Files go to object storage and the database keeps only their keys.",
        "The billing service is the only writer of the invoices table; everything else reads a replica.",
        "We'll shard the events table by tenant id.",
        "Configuration moves to a single TOML file, environment variables override it.",
        "Retries are handled by the job runner, with exponential backoff, instead of inside each handler.",
        "Let's keep the monolith and split the reporting module out later.",
        "Authentication goes through the identity provider with OIDC; local passwords are dropped.",
    ),
    "requirements": (
        "The system must respond within two seconds.",
        "The API shall reject requests without a valid token.",
        "Every export is required to include a checksum.",
        "Personal data must be deleted within 30 days of a deletion request.",
        "The page has to load in under one second on a mid-range phone.",
        "Invoices must carry a sequential number without gaps, as the tax law requires.",
        "Uploads are limited to 25 MB per file.",
        "The service needs to keep working when the payment provider is down.",
        "Every admin action must be written to the audit log.",
        "Passwords must be at least 12 characters long.",
    ),
    "user_preference": (
        "I prefer short functions and descriptive names.",
        "Please always write type hints for me.",
        "Don't add comments that restate the code.",
        "Ask me before you run anything that changes the database.",
        "Leave the generated files alone, I regenerate them myself.",
        "Keep commit messages to one line in the imperative.",
        "I'd rather you show me the plan first and write the code after I say yes.",
        "Use tabs in the Go files and do not reformat code you did not change.",
        "Never push to the main branch, open a pull request instead.",
        "Write the tests before the fix, and run only the affected test file.",
        "No emojis in the docs, please.",
        "Explain any change to the build scripts before making it.",
    ),
    "test_history": (
        "12 tests passed and 1 failed in the test suite.",
        "The flaky test is fixed now.",
        "test_login fails with a timeout error.",
        "The integration test failed because the fixture reused the same user for both sessions.",
        "The load test held 800 requests per second with a p99 of 120 ms.",
        "The benchmark went from 340 ms to 95 ms after the index was added.",
        "The checkout test is flaky on CI: it passes locally and fails about one run in ten.",
        "Before this fix the parser returned an empty list for files with a BOM, and the import test caught it.",
        "After the change all 214 tests pass.",
        "Measured on the device: 3.1 mA average in sleep, down from 4.8 mA.",
        "The regression came from the upgrade of the date library; pinning the old version made the tests green.",
    ),
    "code_pattern": (
        "Gotcha: this call deadlocks when used inside a transaction.",
        "The convention here is to wrap every handler in a retry decorator.",
        "Turns out the cache must be cleared before reloading the config.",
        "Always close the reader in a finally block, otherwise the file handle leaks.",
        "Handlers never throw: they return a result object with the error.",
        "No heap allocation after start-up; use the static pools.",
        "Call the init function before any other function of the module.",
        "Interrupt handlers only set a flag; the work happens in the main loop.",
        "Dates are stored in UTC and converted at the edge, in the view layer.",
        "The ORM's bulk update skips the model hooks, so the cache has to be invalidated by hand.",
        "Every repository method takes the transaction as its first argument.",
        "Use the helper in tests instead of asserting on the raw message.",
        "Reading the sensor earlier than 100 ms after power-up gives wrong values.",
    ),
    "none": (
        "I'll start by reading the file.",
        "Let me look at how the handler is wired up.",
        "Here is the diff for the change.",
        "Thanks, that looks good.",
        "Can you check why the build is slow?",
        "The function loops over the items and sums their prices.",
        "I updated the README and the changelog.",
        "This module has about four hundred lines.",
        "I ran the linter and it reported nothing.",
        "Next I will rename the variable and update the call sites.",
        "The user clicked the button and nothing happened.",
        "That error comes from the third line of the stack trace.",
        "Good morning, sorry for the delay.",
        "We talked about the roadmap for the next quarter.",
        "The pull request is ready for review.",
        "Bumped the dependency to the latest patch release.",
        "What does the other service do in this case?",
        "Maybe we could try a different approach later.",
    ),
}
"""Example sentences of each type (and of ``none``: narration, questions, chit-chat) the local model
compares a segment with, written for this module in varied domains and wordings."""

# -- what the words around a segment say ---------------------------------------------------------

ACK = re.compile(r"^\W*(ok(ay)?|agreed|yes|yep|yeah|right|sure|great|nice|perfect|cool|fine|good|thanks|sounds good|makes sense|"
                 r"go ahead|do it|let's do (it|that)|\+1|👍)\b[\s.,!:;—-]*", _I)
"""An acknowledgement opening a turn ("ok, go with Decimal"): the words after it are what is said."""
AGREEMENT = re.compile(r"^\W*(agreed|yes|yep|yeah|ok(ay)?|sure|sounds good|makes sense|go ahead|do it|let's do (it|that)|\+1|👍|lgtm)\b", _I)
"""A user's turn that opens by accepting what the assistant just proposed."""
PROPOSAL = re.compile(r"\b(I (suggest|propose|recommend)|I'd (suggest|propose|recommend|go with)|my (suggestion|recommendation) is|"
                      r"the (fix|plan|approach) (is|would be) to)\b", _I)
"""The assistant proposing a course of action: a decision once the user agrees."""
OPTIONS = re.compile(r"\b(two|three|several|a few|the) (options|alternatives|approaches|choices)\b|\bwe could\b.{0,120}\bor\b|\beither\b.{0,120}\bor\b", _I)
"""The assistant laying out options: the user's reply that names one of them is the decision."""
OPTION_WORD = re.compile(r"`([^`\n]{3,40})`|\b([A-Za-z][\w.]*[-_.][\w.-]*\w)\b|(?<!^)(?<![.:!?] )\b([A-Z][a-z]+[A-Z]?\w*)\b")
"""Names of things in an options sentence: code in backticks, dotted/hyphenated names, capitalised words."""
ADDRESSED = re.compile(r"^\W*@?(claude|assistant)\b[,:]?\s*", _I)
"""Text addressed to the assistant ("@claude when you summarise ..."): the author speaking as the user."""
OPEN_ITEM = re.compile(r"^\W*(todo|fixme|xxx|hack)\b", _I)
"""A TODO/FIXME comment is open work, not something decided."""
TOOL_LINE = re.compile(r"^\s*(\[Tool:|●|⏺|⎿|\$ )")
"""The start of a tool call or its output in a Claude Code transcript pasted as text."""
TEST_FAILURE = re.compile(r"\b([1-9]\d*\s+(tests?\s+)?(failed|failing|errors?)|FAILED|FAIL|--- FAIL|panicked|AssertionError|Expected:?)\b")
MEASURED = re.compile(r"\bp\d\d\b|\b\d[\d.,]*\s*(rps|req/s|MB|GB)\b|\bRSS\b|\b(load|soak|stress|perf|performance) test\b|\bbenchmark", _I)
"""A test run with measurements (latency, memory, throughput) is worth keeping even when it passed."""
ABBREVIATIONS = frozenset(["e.g", "i.e", "etc", "vs", "cf", "approx", "incl", "no", "nr", "ca", "mr", "mrs", "dr", "st", "fig", "eq", "al", "resp"])
"""Words after whose period a sentence does not end."""
