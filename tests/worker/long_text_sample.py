"""A realistic long English text for the end-to-end test: five paragraphs, about 3,000 characters."""

from __future__ import annotations

FIVE_PARAGRAPHS = "\n\n".join(
    [
        "The small town of Greenfield lies in a quiet valley between two rivers. Every morning the baker opens "
        "his shop before sunrise, and the smell of fresh bread fills the main street. Farmers bring vegetables "
        "to the market square, where children play near the old fountain. Visitors often say that time moves "
        "more slowly here than in the city. Most people know their neighbours by name. In the evening, families "
        "walk along the river and talk about their day. The church bell rings every hour, and the sound carries "
        "across the fields to the farms on the hills. Nobody here is ever in a hurry.",
        "Last spring the town council decided to build a new library next to the school. The old library was "
        "too small, and its roof leaked whenever it rained. Many families gave money, and local workers offered "
        "their time on weekends. The architect designed large windows so that readers could enjoy the light. "
        "After eight months of work, the building was finally ready in the autumn. The workers planted trees "
        "around it and built a path from the bus stop to the front door. Everyone in the town was proud of what "
        "they had done together. The old building became a small museum.",
        "On the opening day, hundreds of people came to see the new rooms. The mayor gave a short speech and "
        "thanked everyone who had helped. Children ran to the section with picture books, while their parents "
        "looked at the shelves of novels and history books. A group of students played music in the garden. "
        "In the evening, the lights of the library could be seen from the hills. Many visitors stayed until "
        "closing time, and some of them asked for a library card on the very first day. The librarian was "
        "tired but very happy. She went home late that night with a smile.",
        "The library quickly became the heart of the town. Older people meet there to read the newspaper and "
        "talk about the weather. Teachers bring their classes every week to borrow books. On Saturday mornings, "
        "a volunteer reads stories to young children. The librarian says that more than a thousand people now "
        "have a library card, which is almost half of the town. There is also a small room where people can "
        "watch films about nature and travel. In winter, when the days are short and cold, the warm reading "
        "room is always full. Even the cat from the bakery likes to sleep there.",
        "Next year the council wants to add a small cafe and a room for computer lessons. Some people worry about "
        "the cost, but most agree that the library was a good idea. It has brought the community closer "
        "together and given young people a quiet place to study. For the people of Greenfield, the new "
        "building is more than a place for books. It is a place to meet friends. The mayor hopes that other "
        "towns will visit and learn from their example. Perhaps one day every small town in the valley will "
        "have a library like this one. The people of Greenfield certainly hope so.",
    ]
)
