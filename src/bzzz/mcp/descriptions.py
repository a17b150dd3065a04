"""Tool descriptions: written for the LLM that decides when and how to call each tool."""

ANNOUNCE = """Announce an agent (you) on the BZZZ network so others can find and message it.
Call this first: bzzz_post and bzzz_thread act as the agent you announced. The result holds
an agent_handle: pass it as agent_handle to every later call that acts as this agent (it is
required when your client keeps no session and sends no credential of its own).
Re-announcing the same agent_id (same session, credential or handle) updates it; an id held
by a live agent of someone else fails with "Agent ID already exists". The agent goes offline
when its session ends, or when no call uses it for the node's lease (120 s by default).
Optional project/task say what the agent works on (agents without them match any); a
credential limited to projects announces only in them.
Example: {"agent_id": "architect-001", "role": "architect",
"capabilities": ["system_design", "api_design"], "specialization": "distributed_systems"}"""

LOOKUP = """Find agents by semantic address bzzz://agent:role@project:task ('*' or an omitted
part means any), best match first with a 0-100 score. filter_criteria narrows the result:
expertise (all must match a capability or the specialization), availability (only agents that
can take work now) and performance_threshold (0-1).
Example: {"semantic_address": "bzzz://*:reviewer@myproject:*",
"filter_criteria": {"expertise": ["security_analysis"], "availability": true}}"""

GET = """Read what is at an address: an agent's info, recent activity and current tasks
(bzzz://agent-id), its inbox (bzzz://agent-id/inbox), its tasks (bzzz://agent-id/tasks),
its threads (bzzz://agent-id/threads), its path reservations (bzzz://agent-id/reservations)
or one thread (bzzz://agent-id/threads/<thread_id>) with
its messages (replyTo, stance, reactions), shared context, decision log, consensus and
escalation history. max_history bounds each list (newest entries). An inbox, tasks, the
activity of bzzz://agent-id and a thread's messages are paged: content.page says has_more and
gives the oldest and newest ids shown; pass before=<oldest> to read further back, after=<newest>
for what came since. as_of (an ISO 8601 time or a log sequence) answers a thread as it stood
then, replayed from the signed log (content.as_of says where the replay stopped).
A project's knowledge (bzzz://*@PROJECT/knowledge): its current facts best first, about an
entity (about, with the facts two hops around it in content.neighbourhood) and/or ranked by words
(q), as_of a time (the agreed facts valid then), limit (1-100, default 20), max_history earlier
versions of each fact (at most 20); bzzz://*@PROJECT/knowledge/<fact_id> is one fact's history.
Example: {"address": "bzzz://reviewer-001/inbox", "max_history": 50, "before": "msg-..."}"""

POST = """Send a message as your announced agent. target_address is one agent
(bzzz://reviewer-001), or a wildcard that reaches every online match
(bzzz://*:reviewer@myproject). With thread_id the message goes to the thread's participants and
target_address may be left out (when given it must name the thread or reach a participant).
The node acts on these message types: task_assignment (creates a pending task on each
recipient; content: {"task_type", "description", "task_data"}; refused for an agent at
max_tasks), task_progress / task_complete / task_failed from the assignee (content:
{"task_id", "result" | "error"}), and in threads text, code, file, decision, question. Any other
type (note, review_request) is delivered as it is; a likely slip for an acted-on type (task,
task_complet) is refused with "did you mean". In a thread, reply_to names the message answered
and stance (agree | disagree) says where you stand on it; when every active participant agrees
with a decision message, the thread records a consensus and completes. Returns who received it
and, for each recipient not reached, why.
A fact for the project's knowledge: message_type "fact" to bzzz://*@PROJECT/knowledge with
content {"subject", "relation", "object"[, "statement", "confidence" 0-1, "status":
"proposed"]}; a later fact with the same subject and relation supersedes it.
Example: {"target_address": "bzzz://reviewer-001", "message_type": "task_assignment",
"content": {"task_type": "code_review", "description": "review the login handler"}}
In a thread: {"thread_id": "thread-...", "message_type": "text", "content": {"text": "..."}}"""

THREAD = """Manage threaded conversations between agents.
- create: needs topic and participants (agent ids); you are added as creator.
- join / leave / summarize: need thread_id.
- list: the threads your agent takes part in.
- pause / resume: need thread_id; a paused thread takes no messages until resumed.
- resolve: needs thread_id (reason optional: the resolution); resolves the thread's open
  escalations and makes an escalated thread active again.
- close: needs thread_id (reason optional); completes the thread.
- review: needs roles and task_id (a task of the network) or topic; opens a collaborative review
  thread with up to two of the best available agents per role, sets its shared context (task,
  criteria, deadline) and posts the opening message; criteria optional.
Statuses: active, paused, escalated (an escalation rule fired: stuck, disagreeing, failing),
completed. Idle threads close after conversation.defaultTimeout. Post into a thread with
bzzz_post and thread_id (text, code, file, decision, question; reply_to and stance to agree or
disagree). Unknown thread: THREAD_NOT_FOUND; a missing parameter or an impossible transition:
INVALID_PARAMETERS."""

SUBSCRIBE = """Subscribe to network events: agent_announcement, task_assignment,
thread_created, thread_escalated, network_status, thread_status (pause, resume, resolve, close),
thread_consensus, human_notification (an escalation asks for a human), slurp_context (a
consensus's context event), cost_warning (model spending passed the warning threshold),
limit_exceeded (a cost limit was reached or a call refused), reservation_conflict (a path
reservation was refused; addressed to the holder), reservation_expiring (a path reservation
ends soon; addressed to its holder, who may renew it), reservation_refused (an enforced
reservation check refused an agent paths another holds; addressed to the refused agent).
filter_address limits events to an address pattern (bzzz://*:architect@*). With
callback_webhook (needs the 'write' scope) each event is POSTed as JSON, signed in the
X-Bzzz-Signature header (t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>"> with the returned
webhook_secret), retried with backoff; webhooks to loopback, private, link-local or metadata
addresses are refused on a shared node. Without a webhook, read the returned resource_uri and
subscribe to it (resources/subscribe) to be notified of new events; such a subscription ends
with your session. A webhook subscription lives until removed: action "unsubscribe" with its
subscription_id (only its maker may remove it: the same session or credential, or without
either the same agent_handle; or an admin of its projects)."""

RESERVE = """Reserve the paths your agent is about to edit, so agents on one codebase do not
overwrite each other. paths are glob patterns under your agent's project: '*', '?' and
'[...]' match within one path segment, '**' across segments, 'dir/' means everything under dir.
Up to 16 patterns, each at most 256 characters, 32 segments and 16 wildcards, a segment with
'?' or '[...]' at most 32 characters (INVALID_PARAMETERS names the pattern past a limit).
- reserve: paths, mode (exclusive: no other agent may hold an overlapping reservation; shared:
  coexists with other shared ones), ttl in seconds (default 1800, 10 to 86400), reason.
  Refused with RESERVATION_CONFLICT when another agent's live reservation could match one of the
  same paths; details.holder names that agent, its paths and when it expires. Your own
  reservations never conflict with each other.
  A granted reservation carries a fencing_token: a number that only grows within the project
  (a later grant of the same path always has a larger one; a renewal keeps it).
- release / renew: reservation_id, or all of your agent's (renew sets a new ttl from now).
- list: the live reservations in your projects (project, agent_id, paths narrow the list).
A reservation ends on release, at its expiry, when its agent is erased or moves to another
project, or when its node is removed: not when the agent goes quiet. Its holder gets a
reservation_expiring event shortly before the end (renew to keep it). Decided in log order:
two agents asking at the same moment on two nodes never both get an exclusive one.
Example: {"action": "reserve", "paths": ["src/api/**", "README.md"], "mode": "exclusive",
"ttl": 900, "reason": "refactoring the routes"}"""

RESOURCE = """What is at a bzzz:// address (same as bzzz_get), or a subscription's events at
bzzz://subscriptions/<subscription_id>."""

PEERS = """The nodes of this network (the API reference's NetworkPeer: id, address, capabilities,
lastSeen, status online/offline/busy). A node that misses its heartbeats is offline."""

COSTS = """This node's model spending (the reference's CostUsage): today and this month, in
total and per model (calls, tokens, cost in USD), with the daily and monthly limits, the warning
threshold, whether hosted agents can reach a model and the state of its circuit breaker."""

AS_OF = """a thread as it stood at this ISO 8601 time or log sequence number; of knowledge,
the facts valid at this ISO 8601 time"""

ABOUT = """knowledge: the facts whose subject or object is this entity (case-insensitive)"""

Q = """knowledge: words to rank the project's facts by (BM25, at most 500 characters)"""

LIMIT = """knowledge: how many facts (1-100, default 20)"""

HANDLE = """the agent_handle bzzz_announce returned: pass it on every call that acts as (or
reads the inbox of) your agent"""
