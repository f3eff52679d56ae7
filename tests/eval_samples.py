"""Tiny handmade conversations in the LoCoMo, BEAM and LongMemEval formats, written into a test's tmp_path.

Invented text only (no benchmark data is copied): each file has just enough structure to exercise one
loader, the malformed evidence each format is known for, and the metrics.
"""

from __future__ import annotations

import json
from pathlib import Path

# Filler turns push the early, evidence-bearing turns out of a small transcript tail.
FILLER = [
    "We talked about the weather in the mountains and the rain that never seems to stop.",
    "The bakery on the corner started selling rye bread with caraway seeds again.",
    "Traffic on the ring road was slow all week because of the roadworks near the bridge.",
    "The football match on Saturday ended in a draw after a late penalty.",
    "Someone left a bicycle chained to the railing outside the library for a month.",
    "The museum extended its opening hours on Thursdays until nine in the evening.",
]


def locomo_sample(filler_sessions: int = 3, own_filler: bool = False) -> list[dict]:
    first = [
        {"speaker": "Ana", "dia_id": "D1:1", "text": "The name of my grey cat is Pixel."},
        {"speaker": "Ben", "dia_id": "D1:2", "text": "My sister breeds parrots in Lisbon."},
        {"speaker": "Ana", "dia_id": "D1:3", "text": "My favourite climbing gym is Boulderhaus in Leipzig."},
        {
            "speaker": "Ben",
            "dia_id": "D1:4",
            "text": "I started learning the cello in December.",
            "img_url": ["https://example.invalid/cello.jpg"],
            "blip_caption": "a photo of a cello leaning on a chair",
        },
    ]
    conversation: dict = {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:00 pm on 3 January, 2023",
        "session_1": first,
    }
    for n in range(2, 2 + filler_sessions):
        conversation[f"session_{n}_date_time"] = f"9:30 am on {n} February, 2023"
        conversation[f"session_{n}"] = [
            # `own_filler`: each session says its small talk again in its own way, the same words with
            # its own punctuation (said again word for word, as by default, it writes nothing new)
            {
                "speaker": "Ana" if k % 2 else "Ben",
                "dia_id": f"D{n}:{k + 1}",
                "text": text[:-1] + "!" * (n - 1) if own_filler else text,
            }
            for k, text in enumerate(FILLER)
        ]
    qa = [
        {
            "question": "What is the name of Ana's cat?",
            "answer": "Pixel",
            "evidence": ["D1:1"],
            "category": 4,
        },
        {
            "question": "Where does Ben's sister breed parrots?",
            "answer": "Lisbon",
            "evidence": ["D1:2"],
            "category": 4,
        },
        # space-joined list, and a "D8:6; D9:17"-style pair
        {
            "question": "Cat and climbing?",
            "answer": "Pixel, Boulderhaus",
            "evidence": ["D1:1 D1:3"],
            "category": 1,
        },
        {"question": "Cello and parrots?", "answer": 2023, "evidence": ["D1:4; D1:2"], "category": 2},
        # repairable: "D:11:26" and "D30:05" shapes
        {
            "question": "Which gym does Ana like?",
            "answer": "Boulderhaus",
            "evidence": ["D:1:3"],
            "category": 3,
        },
        {"question": "What pet did Ana adopt?", "answer": "a cat", "evidence": ["D1:01"], "category": 4},
        # unresolvable: a bare "D" and an id that does not exist
        {"question": "Broken evidence?", "answer": "x", "evidence": ["D", "D9:9"], "category": 4},
        {
            "question": "Which parrots does Ana's sister breed?",
            "adversarial_answer": "grey parrots",
            "evidence": ["D1:2"],
            "category": 5,
        },
    ]
    return [
        {
            "sample_id": "conv-test",
            "conversation": conversation,
            "qa": qa,
            "event_summary": {},
            "observation": {"never": "read"},
            "session_summary": {},
        }
    ]


def write_locomo(tmp_path: Path, filler_sessions: int = 3, own_filler: bool = False) -> Path:
    path = tmp_path / "locomo_sample.json"
    path.write_text(json.dumps(locomo_sample(filler_sessions, own_filler)), encoding="utf-8")
    return path


def beam_chat() -> list[dict]:
    def msg(i: int, role: str, content: str, anchor: str | None = None) -> dict:
        m = {"role": role, "id": i, "content": content}
        if role == "user":
            m.update(index=f"1,{i}", question_type="main_question")
            m["content"] = f"{content} ->-> 1,{i}"
        if anchor:
            m["time_anchor"] = anchor
        return m

    first = [
        [msg(0, "user", "I am building a budget tracker in Flask.", "January-10-2024"),
         msg(1, "assistant", "Great, start with the data model for transactions.")],
        [msg(2, "user", "My team has 5 engineers working on the tracker."),
         msg(3, "assistant", "Five engineers can split the backend and the frontend.")],
        [msg(4, "user", "We deploy the tracker on a small VPS in Frankfurt."),
         msg(5, "assistant", "A small VPS is fine for the first release.")],
    ]  # fmt: skip
    # the assistant says the same thing each time, in its own punctuation (a reply said again word for
    # word would write nothing new): restatements for consolidation to merge
    second = [
        [msg(6 + 2 * k, "user", text), msg(7 + 2 * k, "assistant", "Noted" + "!" * (k + 1))]
        for k, text in enumerate(FILLER)
    ]
    second[0][0]["time_anchor"] = "February-20-2024"
    second.append(
        [
            msg(20, "user", "My team has 7 engineers working on the tracker now."),
            msg(21, "assistant", "Seven now."),
        ]
    )
    return [
        {"batch_number": 1, "time_anchor": None, "turns": first},
        {"batch_number": 2, "time_anchor": None, "turns": second},
    ]


def beam_questions() -> dict[str, list[dict]]:
    return {
        "knowledge_update": [
            {
                "question": "How many engineers are on my team?",
                "answer": "7 engineers",
                "source_chat_ids": {"original_info": [2], "updated_info": [20]},
            },
            {
                "question": "Where is the tracker deployed now?",
                "answer": "Frankfurt",
                "source_chat_ids": {"original_info": [4], "updated_info": [4]},
            },
        ],
        "abstention": [
            {
                "question": "Which database did my cousin recommend for the observatory?",
                "ideal_response": "There is no information about this.",
                "why_unanswerable": "No cousin or observatory is ever mentioned.",
            }
        ],
        "information_extraction": [
            {"question": "Where do we deploy the tracker?", "answer": "Frankfurt", "source_chat_ids": [4]}
        ],
        "event_ordering": [
            {"question": "In what order?", "answer": "tracker, team", "source_chat_ids": [0, [2, 4]]}
        ],
        "temporal_reasoning": [
            {
                "question": "How long between?",
                "answer": "41 days",
                "source_chat_ids": {"first_event": [0], "second_event": ["chat_id: 20"]},
            }
        ],
        "preference_following": [
            {
                "question": "Which libraries should I use?",
                "expected_compliance": "Recommends lightweight libraries.",
                "rubric": ["Response should mention minimal dependencies"],
                "source_chat_ids": [999],
            }
        ],
    }


def write_beam(tmp_path: Path) -> Path:
    root = tmp_path / "beam" / "100K"
    folder = root / "1"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "chat.json").write_text(json.dumps(beam_chat()), encoding="utf-8")
    (folder / "probing_questions.json").write_text(json.dumps(beam_questions()), encoding="utf-8")
    return root


def longmemeval_sample() -> list[dict]:
    sessions = [
        [
            {"role": "user", "content": "I bought a blue kayak for the lake trips.", "has_answer": True},
            {"role": "assistant", "content": "A blue kayak sounds fun."},
        ],
        [
            {"role": "user", "content": "What should I cook tonight?"},
            {"role": "assistant", "content": "Try a lentil soup."},
        ],
    ]
    return [
        {
            "question_id": "q-kayak",
            "question_type": "single-session-user",
            "question": "What colour is my kayak?",
            "answer": "blue",
            "question_date": "2023/06/01 (Thu) 10:00",
            "haystack_session_ids": ["s-a", "s-b"],
            "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 18:05"],
            "haystack_sessions": sessions,
            "answer_session_ids": ["s-a"],
        },
        {
            "question_id": "q-boat_abs",
            "question_type": "temporal-reasoning",
            "question": "When did I sell my sailboat?",
            "answer": "You never mentioned a sailboat.",
            "question_date": "2023/06/01 (Thu) 10:00",
            "haystack_session_ids": ["s-b"],
            "haystack_dates": ["not a date"],
            "haystack_sessions": [sessions[1]],
            "answer_session_ids": [],
        },
    ]


def write_longmemeval(tmp_path: Path) -> Path:
    path = tmp_path / "longmemeval_sample.json"
    path.write_text(json.dumps(longmemeval_sample()), encoding="utf-8")
    return path
